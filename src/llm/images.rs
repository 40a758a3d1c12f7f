//! Images for models that read them: the files a person sent, read when a request is built and
//! sent as `data:` URLs in `image_url` parts.
//!
//! The history keeps only the path the channel saved each image at
//! ([`Message::images`]); the bytes are read here, for the request being built, and never
//! stored. Only the newest [`MAX_IMAGES`] images of a prompt go out (older ones stay a path in
//! the text), each at most the model's `max_image_bytes`, and only the formats the OpenAI-style
//! APIs accept (PNG, JPEG, GIF, WebP), recognised by their bytes, not their names. An image that
//! is missing, too large or of another format is left as the path the text already names.
//!
//! An image a tool read (`read_file`) was resolved inside the workspace when it was read; the
//! files may have changed since. So its path must still be the file's real path (no link in
//! any component), and no image is read through a link at its last component: a link swapped
//! in later cannot send a file from outside to the provider.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use tokio::io::AsyncReadExt;

use crate::core::message::{Message, Role, image_type};
use crate::llm::settings::Endpoint;

/// The most images one request carries (the newest).
pub const MAX_IMAGES: usize = 4;

/// What [`load`] gives for a request to the model at `endpoint`: nothing for a model that does
/// not read images (it gets the saved paths in the text).
pub async fn load_for(endpoint: &Endpoint, messages: &[Arc<Message>]) -> HashMap<String, String> {
    if endpoint.profile.vision {
        load(messages, endpoint.max_image_bytes).await
    } else {
        HashMap::new()
    }
}

/// The `data:` URL of each image of `messages` that goes out, by its saved path.
pub async fn load(messages: &[Arc<Message>], max_bytes: u64) -> HashMap<String, String> {
    let mut urls = HashMap::new();
    let mut newest: Vec<(&String, bool)> = Vec::with_capacity(MAX_IMAGES);
    'messages: for message in messages.iter().rev() {
        for path in message.images.iter().rev() {
            if newest.len() == MAX_IMAGES {
                break 'messages;
            }
            newest.push((path, message.role == Role::Tool));
        }
    }
    for (path, from_tool) in newest {
        match read(path, from_tool, max_bytes).await {
            Ok(url) => {
                urls.insert(path.clone(), url);
            }
            Err(why) => {
                tracing::info!(path, why = %why, "Image not sent to the model; it keeps the path.")
            }
        }
    }
    urls
}

/// Why an image is not sent (it stays the path the text names); logged, never shown.
#[derive(Debug, thiserror::Error)]
enum Skipped {
    /// It could not be resolved, opened or read (gone, a link at its last component, ...).
    #[error("{0}")]
    Io(std::io::Error),
    /// A tool's image whose path now leads through a link.
    #[error("the path now leads through a link to {}", .real.display())]
    Relinked {
        /// Where the path leads now.
        real: PathBuf,
    },
    /// Larger than the model's `max_image_bytes`.
    #[error("{size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// The file's size.
        size: u64,
        /// The model's limit.
        limit: u64,
    },
    /// Not one of the formats the APIs accept.
    #[error("not a PNG, JPEG, GIF or WebP image")]
    NotAnImage,
}

/// The `data:` URL of the image at `path`, or why it is not sent; `from_tool` when a tool
/// read it (its path must then be the file's real path).
async fn read(path: &str, from_tool: bool, max_bytes: u64) -> Result<String, Skipped> {
    if from_tool {
        let real = tokio::fs::canonicalize(path).await.map_err(Skipped::Io)?;
        if real != Path::new(path) {
            return Err(Skipped::Relinked { real });
        }
    }
    let mut file = tokio::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .await
        .map_err(Skipped::Io)?;
    let size = file.metadata().await.map_err(Skipped::Io)?.len();
    if size > max_bytes {
        return Err(Skipped::TooLarge {
            size,
            limit: max_bytes,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    (&mut file)
        .take(max_bytes)
        .read_to_end(&mut bytes)
        .await
        .map_err(Skipped::Io)?;
    let mime = image_type(&bytes).ok_or(Skipped::NotAnImage)?;
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(format!("data:{mime};base64,{data}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_newest_images_within_the_limit_go_out_as_data_urls() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("a.png");
        std::fs::write(&png, b"\x89PNG\r\n\x1a\nrest").unwrap();
        let big = dir.path().join("big.jpg");
        std::fs::write(
            &big,
            [0xff, 0xd8, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        )
        .unwrap();
        let text = dir.path().join("fake.png");
        std::fs::write(&text, b"not an image").unwrap();
        let now = chrono::Utc::now().fixed_offset();
        let mut message = Message::new(Role::User, "look", now);
        message.images = [&png, &big, &text, &dir.path().join("gone.png")]
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        // The PNG is 12 bytes, the JPEG 16: a 12-byte limit keeps the JPEG a path.
        let urls = load(&[Arc::new(message)], 12).await;
        assert_eq!(urls.len(), 1, "{urls:?}");
        assert_eq!(
            urls[&png.to_string_lossy().into_owned()],
            "data:image/png;base64,iVBORw0KGgpyZXN0"
        );
    }

    #[tokio::test]
    async fn no_image_is_read_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        let outside = real.join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret.png"), b"\x89PNG\r\n\x1a\nsecret").unwrap();
        let workspace = real.join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::write(workspace.join("ok.png"), b"\x89PNG\r\n\x1a\nfine").unwrap();
        // Read as files in the workspace, then swapped for links: the last component, and a
        // directory on the way.
        std::os::unix::fs::symlink(outside.join("secret.png"), workspace.join("swapped.png"))
            .unwrap();
        std::os::unix::fs::symlink(&outside, workspace.join("dir")).unwrap();
        let now = chrono::Utc::now().fixed_offset();
        let mut result = Message::new(Role::Tool, "an image", now);
        result.images = ["ok.png", "swapped.png", "dir/secret.png"]
            .iter()
            .map(|name| workspace.join(name).to_string_lossy().into_owned())
            .collect();
        let urls = load(&[Arc::new(result.clone())], 1024).await;
        assert_eq!(urls.len(), 1, "{urls:?}");
        assert!(urls.contains_key(&workspace.join("ok.png").to_string_lossy().into_owned()));
        // A person's image is never a link at its last component either.
        result.role = Role::User;
        let urls = load(&[Arc::new(result)], 1024).await;
        assert!(!urls.contains_key(&workspace.join("swapped.png").to_string_lossy().into_owned()));
    }
}
