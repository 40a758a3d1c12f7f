//! [`AccountedTranscriber`]: the layer around the transcription client that records every
//! voice note transcribed in the usage ledger: seconds of audio and their cost (the
//! `transcription.price_per_minute`), under the purpose `transcription`, so `squidbot usage`,
//! `/usage` and the daily cost budget count what speech costs beside the tokens.

use std::sync::Arc;

use async_trait::async_trait;

use crate::accounting::meter::UsageMeter;
use crate::transcription::{Audio, Transcriber, Transcript, TranscriptionError};

/// A transcriber whose every transcription is in the ledger.
pub struct AccountedTranscriber {
    inner: Arc<dyn Transcriber>,
    meter: Arc<UsageMeter>,
    /// The model id, as the ledger names it.
    model: String,
    /// Cost per minute of audio (0: free, a local server).
    price_per_minute: f64,
}

impl AccountedTranscriber {
    /// `inner`, recorded in `meter` as `model` at `price_per_minute`.
    pub fn new(
        inner: Arc<dyn Transcriber>,
        meter: Arc<UsageMeter>,
        model: &str,
        price_per_minute: f64,
    ) -> Self {
        Self {
            inner,
            meter,
            model: model.to_owned(),
            price_per_minute,
        }
    }
}

#[async_trait]
impl Transcriber for AccountedTranscriber {
    async fn transcribe(&self, audio: Audio) -> Result<Transcript, TranscriptionError> {
        let session = audio.session.as_ref().map(ToString::to_string);
        let transcript = self.inner.transcribe(audio).await?;
        let cost = transcript.seconds / 60.0 * self.price_per_minute;
        self.meter
            .record_audio(session.as_deref(), &self.model, transcript.seconds, cost)
            .await;
        Ok(transcript)
    }
}
