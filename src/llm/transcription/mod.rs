//! [`WhisperApiTranscriber`]: voice notes transcribed through any OpenAI-compatible
//! `POST {api_base}/audio/transcriptions` (OpenAI, Groq, a local whisper server), the adapter
//! behind the core's [`Transcriber`] port.
//!
//! The request is `multipart/form-data`, written here by hand ([`multipart`]): reqwest's own
//! multipart support would bring `mime_guess` to guess a type the sender already told. Limits
//! are checked before anything is sent, so an hour-long recording costs nothing: the size
//! always, the length where it is known (the sender's `duration`, or the file's header, see
//! [`length`]). Whisper models are asked for `verbose_json`, which says how long the audio was
//! (the usage ledger bills it by the minute); others (`gpt-4o-transcribe`) for plain `json`.

pub mod length;
mod multipart;

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;

use crate::llm::settings::masked_url;
use crate::llm::wire::error_message;
use crate::transcription::{
    Audio, Transcriber, Transcript, TranscriptionError, TranscriptionErrorKind as Kind,
};

/// What a transcriber is built from (the `transcription` config section, with its provider's
/// `api_base` and key).
#[derive(Clone, Debug)]
pub struct TranscriptionSettings {
    /// Base URL up to and including the version, e.g. `https://api.groq.com/openai/v1`.
    pub api_base: String,
    /// The bearer token; `None` sends none. Never logged.
    pub api_key: Option<String>,
    /// The model id sent (`whisper-1`, `whisper-large-v3`).
    pub model: String,
    /// How long one transcription may take, upload included.
    pub timeout: Duration,
    /// The largest file sent (bytes).
    pub max_bytes: u64,
    /// The longest audio sent (seconds), where its length is known before sending.
    pub max_seconds: u64,
}

/// One OpenAI-compatible transcription endpoint.
pub struct WhisperApiTranscriber {
    client: reqwest::Client,
    url: String,
    settings: TranscriptionSettings,
}

/// The answer: `text` always, `duration` in `verbose_json`.
#[derive(Deserialize)]
struct Answer {
    text: String,
    #[serde(default)]
    duration: Option<f64>,
}

impl WhisperApiTranscriber {
    /// A transcriber posting with `client` (the shared one: rustls, pooled connections).
    pub fn new(client: reqwest::Client, settings: TranscriptionSettings) -> Self {
        let url = format!(
            "{}/audio/transcriptions",
            settings.api_base.trim_end_matches('/')
        );
        Self {
            client,
            url,
            settings,
        }
    }

    /// The response format asked for: Whisper models say the audio's length in `verbose_json`;
    /// OpenAI's newer models accept only `json` and `text`.
    fn response_format(&self) -> &'static str {
        if self.settings.model.to_ascii_lowercase().contains("whisper") {
            "verbose_json"
        } else {
            "json"
        }
    }

    /// Refuses `audio` over a limit before anything is sent; returns its length if known.
    fn admit(&self, audio: &Audio) -> Result<Option<f64>, TranscriptionError> {
        let size = audio.bytes.len() as u64;
        if size > self.settings.max_bytes {
            return Err(TranscriptionError::new(
                Kind::TooLarge,
                format!(
                    "the recording is {} KB, over the {} KB limit for transcription",
                    size / 1000,
                    self.settings.max_bytes / 1000
                ),
            ));
        }
        let seconds = audio
            .duration
            .map(|duration| duration.as_secs_f64())
            .or_else(|| length::seconds(&audio.bytes));
        if let Some(seconds) = seconds
            && seconds > self.settings.max_seconds as f64
        {
            return Err(TranscriptionError::new(
                Kind::TooLong,
                format!(
                    "the recording is {} s long, over the {} s limit for transcription",
                    seconds.round(),
                    self.settings.max_seconds
                ),
            ));
        }
        Ok(seconds)
    }
}

#[async_trait]
impl Transcriber for WhisperApiTranscriber {
    async fn transcribe(&self, audio: Audio) -> Result<Transcript, TranscriptionError> {
        let known = self.admit(&audio)?;
        let form = multipart::Form::new()
            .text("model", &self.settings.model)
            .text("response_format", self.response_format())
            .file(
                "file",
                &audio.file_name,
                audio.mime.as_deref(),
                &audio.bytes,
            );
        let (content_type, body) = form.finish();
        let mut request = self
            .client
            .post(&self.url)
            .timeout(self.settings.timeout)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body);
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key);
        }
        let shown = masked_url(&self.url);
        let timeout = self.settings.timeout.as_secs();
        let failed = |error: reqwest::Error| {
            if error.is_timeout() {
                TranscriptionError::new(
                    Kind::Timeout,
                    format!("the transcription service took longer than {timeout} s"),
                )
            } else {
                TranscriptionError::new(
                    Kind::Unreachable,
                    format!("the transcription service at {shown} could not be reached"),
                )
            }
        };
        let response = request.send().await.map_err(&failed)?;
        let status = response.status();
        let body = response.text().await.map_err(&failed)?;
        if !status.is_success() {
            let kind = match status.as_u16() {
                413 => Kind::TooLarge,
                400..=499 => Kind::Rejected,
                _ => Kind::ServerError,
            };
            let message = error_message(&body);
            return Err(TranscriptionError::new(
                kind,
                format!(
                    "the transcription service answered {}: {message}",
                    status.as_u16()
                ),
            ));
        }
        let answer: Answer = serde_json::from_str(&body).map_err(|error| {
            TranscriptionError::new(
                Kind::ServerError,
                format!("the transcription service answered something unreadable ({error})"),
            )
        })?;
        Ok(Transcript {
            text: answer.text.trim().to_owned(),
            seconds: answer.duration.or(known).unwrap_or(0.0),
        })
    }
}
