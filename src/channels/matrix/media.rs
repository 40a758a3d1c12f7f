//! Files in both directions.
//!
//! In: a received image, file, audio or video is downloaded (the SDK decrypts files from
//! encrypted rooms), saved inside the workspace through [`AttachmentStore`], and offered to the
//! agent as `[attachment: name (type)] → path`, since the file tools can only open the
//! workspace. Out: the per-turn tool `matrix_send_file` uploads a workspace file to the room of
//! the turn; a tool (not a reply convention) because the model then learns whether it worked.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use matrix_sdk::Client;
use matrix_sdk::attachment::AttachmentConfig;
use matrix_sdk::media::{MediaFormat, MediaRequestParameters};
use matrix_sdk::ruma::RoomId;
use matrix_sdk::ruma::events::room::MediaSource;
use matrix_sdk::ruma::events::room::message::MessageType;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::room_keys::Connected;
use super::routing;
use crate::channels::attachments::AttachmentStore;
use crate::core::authority::{Effect, Effects};
use crate::core::origin::Origin;
use crate::core::ports::channel::TurnTools;
use crate::core::ports::tool::{Tool, ToolContext, ToolOutput, TypedSpec, TypedTool};
use crate::core::session::SessionId;
use crate::workspace::{Access, WorkspaceGuard};

/// The running channel's client and room-key guard, shared with the tool; `None` while
/// logged out. A std lock: held only to clone them out.
pub type ClientSlot = Arc<RwLock<Option<Connected>>>;

/// The largest file sent or received (bytes); bigger ones are refused with a message.
pub const MAX_FILE: u64 = 50 * 1024 * 1024;

/// A media message: its file name, MIME type, size if told, and where it is.
pub struct MediaRef {
    /// The file name the sender gave (or the body).
    pub name: String,
    /// The MIME type the sender gave.
    pub mimetype: Option<String>,
    /// The size the sender gave.
    pub size: Option<u64>,
    /// The plain or encrypted source.
    pub source: MediaSource,
    /// The caption: the body, when the sender also gave a file name that differs from it
    /// (Matrix 1.10 media captions).
    pub caption: Option<String>,
    /// Whether it is speech to transcribe: an `m.audio` (a voice message, MSC3245, is one).
    pub audio: bool,
    /// How long it is, where the sender said (`info.duration`).
    pub duration: Option<std::time::Duration>,
}

/// The media of a message, if it is an image, file, audio or video.
pub fn media_of(msgtype: &MessageType) -> Option<MediaRef> {
    let (audio, duration) = match msgtype {
        MessageType::Audio(c) => (true, c.info.as_ref().and_then(|i| i.duration)),
        _ => (false, None),
    };
    let (name, body, source, mimetype, size) = match msgtype {
        MessageType::Image(c) => (
            c.filename.clone(),
            c.body.clone(),
            c.source.clone(),
            c.info.as_ref().and_then(|i| i.mimetype.clone()),
            c.info.as_ref().and_then(|i| i.size).map(u64::from),
        ),
        MessageType::File(c) => (
            c.filename.clone(),
            c.body.clone(),
            c.source.clone(),
            c.info.as_ref().and_then(|i| i.mimetype.clone()),
            c.info.as_ref().and_then(|i| i.size).map(u64::from),
        ),
        MessageType::Audio(c) => (
            c.filename.clone(),
            c.body.clone(),
            c.source.clone(),
            c.info.as_ref().and_then(|i| i.mimetype.clone()),
            c.info.as_ref().and_then(|i| i.size).map(u64::from),
        ),
        MessageType::Video(c) => (
            c.filename.clone(),
            c.body.clone(),
            c.source.clone(),
            c.info.as_ref().and_then(|i| i.mimetype.clone()),
            c.info.as_ref().and_then(|i| i.size).map(u64::from),
        ),
        _ => return None,
    };
    let caption = name
        .as_ref()
        .filter(|name| **name != body && !body.trim().is_empty())
        .map(|_| body.clone());
    Some(MediaRef {
        name: name.unwrap_or(body),
        caption,
        mimetype,
        size,
        source,
        audio,
        duration,
    })
}

/// What receiving a file gave the agent.
pub struct Received {
    /// The text offered to the agent: where the file was saved, or what went wrong.
    pub text: String,
    /// The saved path, when the file is an image (a model that reads images gets it).
    pub image: Option<String>,
    /// The saved path and the bytes, when the media is audio (to be transcribed).
    pub audio: Option<(PathBuf, Vec<u8>)>,
}

impl From<String> for Received {
    fn from(text: String) -> Self {
        Self {
            text,
            image: None,
            audio: None,
        }
    }
}

/// Downloads (and decrypts) `media` and saves it in the workspace.
pub async fn receive(
    client: &Client,
    store: &AttachmentStore,
    session: &SessionId,
    media: MediaRef,
) -> Received {
    let kind = media.mimetype.as_deref().unwrap_or("unknown type");
    if media.size.is_some_and(|size| size > MAX_FILE) {
        return format!(
            "[attachment not downloaded: {} is larger than 50 MiB]",
            media.name
        )
        .into();
    }
    let request = MediaRequestParameters {
        source: media.source,
        format: MediaFormat::File,
    };
    let bytes = match client.media().get_media_content(&request, false).await {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::warn!(name = %media.name, error = %error, "Could not download a Matrix attachment.");
            return format!("[attachment not available: {} ({error})]", media.name).into();
        }
    };
    let store = store.clone();
    let name = media.name.clone();
    let session = session.clone();
    let today = chrono::Local::now().date_naive();
    let saved = tokio::task::spawn_blocking(move || {
        store
            .save(&session, today, &name, &bytes)
            .map(|path| (path, bytes))
    })
    .await;
    match saved {
        Ok(Ok((path, bytes))) => Received {
            text: format!("[attachment: {} ({kind})] → {}", media.name, path.display()),
            image: kind
                .starts_with("image/")
                .then(|| path.to_string_lossy().into_owned()),
            audio: media.audio.then_some((path, bytes)),
        },
        Ok(Err(error)) => format!("[attachment not saved: {} ({error})]", media.name).into(),
        Err(error) => format!("[attachment not saved: {} ({error})]", media.name).into(),
    }
}

/// `matrix_send_file` in turns of Matrix sessions: the Matrix channel's share of the turn
/// tools, which the plug-in list adds to everyone's (`ChannelTools`).
pub struct MatrixTurnTools {
    send_file: Arc<dyn Tool>,
}

impl MatrixTurnTools {
    /// The file tool sending from `workspace` through the channel's `client`.
    pub fn new(client: ClientSlot, workspace: PathBuf) -> Self {
        Self {
            send_file: Arc::new(SendFileTool::new(client, workspace)),
        }
    }
}

impl TurnTools for MatrixTurnTools {
    fn for_turn(
        &self,
        _session: &SessionId,
        metadata: &Map<String, Value>,
        _origin: &Origin,
    ) -> Vec<Arc<dyn Tool>> {
        if metadata.contains_key(routing::MATRIX_ROOM_ID) {
            vec![self.send_file.clone()]
        } else {
            Vec::new()
        }
    }
}

/// `matrix_send_file`: uploads a workspace file to the turn's room.
pub(crate) struct SendFileTool {
    spec: TypedSpec<SendFileArguments>,
    client: ClientSlot,
    workspace: PathBuf,
}

/// The arguments of `matrix_send_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendFileArguments {
    /// Path of the file, relative to the workspace.
    path: String,
}

impl SendFileTool {
    /// The tool sending through the channel's `client` from `workspace`.
    pub(crate) fn new(client: ClientSlot, workspace: PathBuf) -> Self {
        Self {
            spec: TypedSpec::new(
                "matrix_send_file",
                "Send a file from the workspace to this Matrix room as an attachment.",
            ),
            client,
            workspace,
        }
    }
}

/// A MIME type from the file extension; unknown ones are sent as bytes.
fn mime_for(name: &str) -> &'static str {
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match extension.as_deref() {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("svg") => "image/svg+xml",
        Some("pdf") => "application/pdf",
        Some("txt" | "log") => "text/plain",
        Some("md") => "text/markdown",
        Some("csv") => "text/csv",
        Some("json") => "application/json",
        Some("html" | "htm") => "text/html",
        Some("mp3") => "audio/mpeg",
        Some("ogg") => "audio/ogg",
        Some("mp4") => "video/mp4",
        Some("zip") => "application/zip",
        _ => "application/octet-stream",
    }
}

#[async_trait]
impl TypedTool for SendFileTool {
    type Arguments = SendFileArguments;

    fn definition(&self) -> &TypedSpec<SendFileArguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::SendsFiles])
    }

    async fn run(&self, arguments: SendFileArguments, context: &ToolContext) -> ToolOutput {
        let Some(room_id) = context
            .metadata
            .get(routing::MATRIX_ROOM_ID)
            .and_then(Value::as_str)
        else {
            return ToolOutput::error("this turn did not come from a Matrix room");
        };
        let connected = self.client.read().ok().and_then(|slot| slot.clone());
        let Some(Connected { client, keys }) = connected else {
            return ToolOutput::error("the Matrix channel is not connected");
        };
        let room = RoomId::parse(room_id)
            .ok()
            .and_then(|room_id| client.get_room(&room_id));
        let Some(room) = room else {
            return ToolOutput::error(format!("the bot is not in room {room_id}"));
        };
        let guard = match WorkspaceGuard::new(&self.workspace, true, &[]) {
            Ok(guard) => guard,
            Err(error) => return ToolOutput::error(format!("{}: {error}", arguments.path)),
        };
        // The file rule every tool's file effects go through: what is sent is read, so the
        // owner's private files and other conversations' attachments go only where no one but
        // the owner reads.
        let path = match guard.authorize(&arguments.path, Access::Send, context) {
            Ok(path) => path,
            Err(refusal) => return refusal,
        };
        // Opened beneath the workspace: a component swapped for a link since the check fails
        // the open instead of leading out.
        let shown = arguments.path.clone();
        let read = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, String> {
            use std::io::Read;
            let mut file = guard.open_read(&path).map_err(|e| e.to_string())?;
            let meta = file.metadata().map_err(|e| e.to_string())?;
            if !meta.is_file() {
                return Err("it is not a file".to_owned());
            }
            if meta.len() > MAX_FILE {
                return Err("it is larger than 50 MiB".to_owned());
            }
            let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
            file.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
            Ok(bytes)
        })
        .await;
        let bytes = match read {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(why)) => return ToolOutput::error(format!("{shown}: {why}")),
            Err(error) => return ToolOutput::error(format!("{shown}: {error}")),
        };
        let path = std::path::PathBuf::from(&shown);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".to_owned());
        let mime: mime::Mime = mime_for(&name)
            .parse()
            .unwrap_or(mime::APPLICATION_OCTET_STREAM);
        let size = bytes.len();
        keys.settle().await;
        match room
            .send_attachment(name.clone(), &mime, bytes, AttachmentConfig::new())
            .await
        {
            Ok(_) => ToolOutput::ok(format!("Sent {name} ({size} bytes, {mime}) to the room.")),
            Err(error) => ToolOutput::error(format!("sending {name}: {error}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mime_types_come_from_the_extension() {
        assert_eq!(mime_for("report.PDF"), "application/pdf");
        assert_eq!(mime_for("notes.txt"), "text/plain");
        assert_eq!(mime_for("noext"), "application/octet-stream");
    }
}
