//! The transcriber of voice notes, built from the `transcription` section: the OpenAI-compatible
//! client at its provider's `api_base` with its key, inside the accounting layer that records
//! each transcription in the usage ledger. `None` while the section is absent.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use squidbot::accounting::meter::UsageMeter;
use squidbot::accounting::transcription::AccountedTranscriber;
use squidbot::channels::voice::VoiceNotes;
use squidbot::config::Config;
use squidbot::llm::{Timeouts, TranscriptionSettings, WhisperApiTranscriber, http_client};

/// The voice notes of the channels, if `transcription` is configured (validation made sure
/// its provider exists).
pub(crate) fn voice_notes(
    config: &Config,
    usage: &Arc<UsageMeter>,
) -> anyhow::Result<Option<Arc<VoiceNotes>>> {
    let Some(transcription) = &config.transcription else {
        return Ok(None);
    };
    let provider = config
        .llm
        .providers
        .get(&transcription.provider)
        .with_context(|| format!("unknown provider {:?}", transcription.provider))?;
    let timeout = Duration::from_secs(transcription.timeout_seconds);
    let timeouts = Timeouts {
        connect: Duration::from_secs(config.llm.timeouts.connect_seconds),
        first_byte: timeout,
        idle: timeout,
        total: timeout,
    };
    let client = http_client(&timeouts).context("building the transcription HTTP client")?;
    let settings = TranscriptionSettings {
        api_base: provider.api_base.clone(),
        api_key: (!provider.api_key.is_empty()).then(|| provider.api_key.expose().to_owned()),
        model: transcription.model.clone(),
        timeout,
        max_bytes: transcription.max_bytes,
        max_seconds: transcription.max_seconds,
    };
    let client = Arc::new(WhisperApiTranscriber::new(client, settings));
    let accounted = AccountedTranscriber::new(
        client,
        usage.clone(),
        &transcription.model,
        transcription.price_per_minute,
    );
    Ok(Some(Arc::new(VoiceNotes::new(Arc::new(accounted)))))
}
