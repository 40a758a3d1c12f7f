//! **API Boundary.** The transcription port: a voice note's audio in, the words said out.
//!
//! A person who speaks to the bot (a Matrix voice message, an audio file attached to a mail)
//! means the words, not the file: the channel hands the audio to a [`Transcriber`] before it
//! decides whether the message is addressed to the bot, and the transcript is what the turn is
//! about. Failures are values with a kind ([`TranscriptionErrorKind`]), so the channel tells the
//! person why in one place and still answers the message as a voice note that could not be
//! transcribed.

use std::time::Duration;

use async_trait::async_trait;

use crate::core::session::SessionId;

/// One voice note to transcribe.
#[derive(Clone, Debug)]
pub struct Audio {
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// The file name the sender gave (its extension tells the server the format).
    pub file_name: String,
    /// The MIME type the sender gave, if any.
    pub mime: Option<String>,
    /// How long it is, where the sender said (a Matrix voice message's `info.duration`) or the
    /// file's header tells.
    pub duration: Option<Duration>,
    /// The conversation it belongs to, for the usage ledger.
    pub session: Option<SessionId>,
}

/// What was said.
#[derive(Clone, Debug, PartialEq)]
pub struct Transcript {
    /// The words, as the model heard them.
    pub text: String,
    /// Seconds of audio, as the server measured them (or as known before sending).
    pub seconds: f64,
}

/// Why a voice note was not transcribed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TranscriptionErrorKind {
    /// The file is larger than `transcription.max_bytes` (or the server's own limit).
    TooLarge,
    /// The audio is longer than `transcription.max_seconds`.
    TooLong,
    /// The server could not be reached (refused, reset, DNS).
    Unreachable,
    /// The server did not answer within `transcription.timeout_seconds`.
    Timeout,
    /// The server refused the audio (a 4xx: a format it cannot decode, a bad key).
    Rejected,
    /// The server failed (a 5xx) or answered something that is no transcript.
    ServerError,
}

/// Why a voice note was not transcribed, with what the person is told.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct TranscriptionError {
    /// What went wrong, as a kind.
    pub kind: TranscriptionErrorKind,
    /// The particulars (a status and the server's message, the limit that was passed), said
    /// to the person and logged; never a key.
    pub detail: String,
}

impl TranscriptionError {
    /// An error of `kind`, told as `detail`.
    pub fn new(kind: TranscriptionErrorKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
        }
    }
}

/// Turns speech into text.
#[async_trait]
pub trait Transcriber: Send + Sync {
    /// The words said in `audio`, or why they cannot be had.
    async fn transcribe(&self, audio: Audio) -> Result<Transcript, TranscriptionError>;
}
