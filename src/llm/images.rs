//! Images for models that read them: the files a person sent, read when a request is built and
//! sent as `data:` URLs in `image_url` parts.
//!
//! The history keeps only the path the channel saved each image at
//! ([`Message::images`]); the bytes are read here, for the request being built, and never
//! stored. Only the newest [`MAX_IMAGES`] images of a prompt go out (older ones stay a path in
//! the text), each at most the model's `max_image_bytes`, and only the formats the OpenAI-style
//! APIs accept (PNG, JPEG, GIF, WebP), recognised by their bytes, not their names. An image that
//! is missing, too large or of another format is left as the path the text already names.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;

use crate::core::message::Message;

/// The most images one request carries (the newest).
pub const MAX_IMAGES: usize = 4;

/// The `data:` URL of each image of `messages` that goes out, by its saved path.
pub async fn load(messages: &[Arc<Message>], max_bytes: u64) -> HashMap<String, String> {
    let mut urls = HashMap::new();
    let newest = messages
        .iter()
        .rev()
        .flat_map(|message| message.images.iter().rev())
        .take(MAX_IMAGES);
    for path in newest {
        match read(path, max_bytes).await {
            Ok(url) => {
                urls.insert(path.clone(), url);
            }
            Err(why) => {
                tracing::info!(path, why, "Image not sent to the model; it keeps the path.")
            }
        }
    }
    urls
}

/// The `data:` URL of the image at `path`, or why it is not sent.
async fn read(path: &str, max_bytes: u64) -> Result<String, String> {
    let size = tokio::fs::metadata(path)
        .await
        .map_err(|error| error.to_string())?
        .len();
    if size > max_bytes {
        return Err(format!("{size} bytes, over the {max_bytes}-byte limit"));
    }
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|error| error.to_string())?;
    let mime = sniff(&bytes).ok_or("not a PNG, JPEG, GIF or WebP image")?;
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(format!("data:{mime};base64,{data}"))
}

/// The image type of `bytes`, from their signature.
fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::message::Role;

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

    #[test]
    fn formats_are_told_by_their_bytes() {
        assert_eq!(sniff(b"GIF89a..."), Some("image/gif"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"<svg"), None);
    }
}
