//! The Matrix channel: the owner chats with squidbot in Matrix rooms, encrypted ones included.
//!
//! Built on matrix-sdk with its SQLite store, so the account's encryption keys and room state
//! survive restarts. The channel drives the sync loop itself (rather than through event
//! handlers) because it must know which batch an event came in: the sync token it persists
//! advances only once every answered event of the batches before it was persisted, which is
//! what "persist before acknowledging" means for a sync token.
//!
//! - [`policy`]: who and what is answered (room filter, allowlist, group policy, real mentions).
//! - [`sync_state`]: the persisted sync token and the ids of events already handed over.
//! - [`sink`]: [`MatrixReplySink`], replies as HTML, in the thread, split, with typing.
//! - [`media`]: received files saved in the workspace, and the `matrix_send_file` tool.
//! - [`room_keys`]: room keys rotated, never re-sent at a later index, when a member's device
//!   starts a new Olm session (what kept the bot's first messages unreadable on some devices).
//! - [`backfill`]: the messages a `limited` sync skipped, paged back and handled in order.
//! - `inbound`: a timeline event turned into an `Inbound` (captions, replies, threads, edits
//!   that take the place of a message not yet answered).
//! - `edits`: a message and its edit in one batch: the edit is answered in its place.
//! - `submit`: a message's hand-over to the router, then, once it is persisted, the sync
//!   position and the read receipt.
//! - `voice`: voice messages transcribed off the sync loop, before the mention gate, the
//!   room's later messages following them in order.
//! - [`relations`]: what a reply refers to (fallback dropped, the replied-to message fetched).
//! - [`device`]: the bot's device id, chosen per home and kept in the store.
//! - [`store_check`]: whether the crypto store still holds the keys the server has for the
//!   device (a lost store is reported, or replaced by a new device).
//! - [`identity`]: the bot's cross-signing identity, made at its first login.
//! - [`verification`]: the owner's emoji verification of the bot, answered by the bot.
//! - [`verification_desk`]: where the gateway shows the emoji and `squidbot matrix verify`
//!   gives the owner's answer.
//! - [`config`]: its settings (`channels.matrix`) and their checks, in every build.
//! - [`channel`]: [`MatrixChannel`], login, the sync loop with backoff, and its status.
//! - [`plugin`]: [`MatrixPlugin`], the channel on the list of plug-ins: how it is built,
//!   described, checked and aimed at by scheduled jobs.
//! - [`doctor`]: `squidbot doctor`'s homeserver and login checks.
//! - [`routing`]: the routing keys of a Matrix turn's metadata.

pub mod backfill;
pub mod channel;
pub mod config;
pub mod device;
pub mod doctor;
mod edits;
pub mod identity;
mod inbound;
pub mod media;
pub mod plugin;
pub mod policy;
pub mod relations;
pub mod room_keys;
pub mod sink;
pub mod store_check;
mod submit;
pub mod sync_state;
pub mod undecrypted;
pub mod verification;
pub mod verification_desk;
mod voice;

use crate::core::error_chain::Chain;

pub use channel::{MatrixChannel, MatrixStatus};
pub use media::MatrixTurnTools;
pub use plugin::MatrixPlugin;
pub use sink::MatrixReplySink;

/// The routing-metadata keys of a Matrix turn: where its reply goes. The channel writes them
/// on every message, a scheduled job carries them ([`MatrixPlugin`]), and the file tool reads
/// them.
pub mod routing {
    /// The Matrix room a reply goes to.
    pub const MATRIX_ROOM_ID: &str = "matrix_room_id";
    /// The Matrix thread a reply belongs to (its root event).
    pub const MATRIX_THREAD_ROOT: &str = "matrix_thread_root";
}

/// What went wrong in the Matrix channel.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// The client could not be built (bad homeserver URL, store cannot be opened).
    #[error("building the Matrix client for {homeserver}: {}", Chain(error))]
    Build {
        /// The configured homeserver.
        homeserver: String,
        /// The SDK's error.
        error: matrix_sdk::ClientBuildError,
    },
    /// The configured user id does not parse.
    #[error(
        "channels.matrix.user_id {user_id:?} is not a Matrix user id: {}",
        Chain(error)
    )]
    UserId {
        /// The configured value.
        user_id: String,
        /// Why it does not parse.
        error: matrix_sdk::IdParseError,
    },
    /// Login (password) or session restore (access token) was refused.
    #[error("logging in as {user_id}: {}", Chain(error))]
    Login {
        /// The bot's user id.
        user_id: String,
        /// The SDK's error.
        error: Box<matrix_sdk::Error>,
    },
    /// The access token belongs to another user or device than configured.
    #[error("the access token is for {actual}, but channels.matrix says {configured}")]
    WrongToken {
        /// The configured user and device.
        configured: String,
        /// What the server says the token is for.
        actual: String,
    },
    /// The homeserver refused the sync because the session is no longer valid.
    #[error("the homeserver refused the session: {}", Chain(error))]
    SessionRefused {
        /// The SDK's error.
        error: Box<matrix_sdk::Error>,
    },
    /// The client has no logged-in user or device (it always has after login).
    #[error("the Matrix client is not logged in")]
    NotLoggedIn,
    /// The crypto store's device updates could not be watched.
    #[error("watching the Matrix device list: {}", Chain(error))]
    DeviceUpdates {
        /// The SDK's error.
        error: Box<matrix_sdk::Error>,
    },
    /// The store directory could not be created.
    #[error("creating the Matrix store directory {path}: {error}")]
    StoreDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The crypto store does not hold the keys the server has for the device.
    #[error(
        "the Matrix crypto store does not hold the keys the server has for device {device} (the store was lost or replaced): nothing encrypted can be read. Configure a password (squidbot then logs in as a new device) or the access token of a new device"
    )]
    StoreMismatch {
        /// The device id.
        device: String,
    },
    /// The store was moved aside to log in as a new device.
    #[error(
        "the Matrix crypto store did not match device {device} on the server; it was moved to {aside} and the channel logs in as a new device"
    )]
    NewDevice {
        /// The old device id.
        device: String,
        /// Where the old store went.
        aside: std::path::PathBuf,
    },
}
