//! Voice notes, as every channel that receives them (Matrix, email) treats them: which files
//! are speech, transcribed once however often they arrive, told to the model as what the
//! person said, and told to the person when they could not be transcribed.
//!
//! The transcript is the person's message: [`told`] marks it as transcribed from a voice note
//! and names the saved audio's path, so the model knows where it came from and the history (and
//! `search_history`) holds the words. When transcription fails, the message is still answered,
//! as a voice note that could not be transcribed, and [`NotedReply`] puts the reason at the top
//! of the reply, so the person learns it whatever the model says.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;

use crate::core::ports::approvals::ApprovalRequest;
use crate::core::ports::channel::{DeliveryError, ReplySink};
use crate::transcription::{Audio, Transcriber, Transcript, TranscriptionError};

/// How many transcripts are remembered, so a redelivered or edited voice note is not
/// transcribed (and paid for) again.
const REMEMBERED: usize = 256;

/// File name endings of the common voice memo formats, for senders that give no `audio/` type
/// (a mail client's `application/octet-stream`).
const AUDIO_ENDINGS: [&str; 13] = [
    ".ogg", ".oga", ".opus", ".m4a", ".mp3", ".wav", ".webm", ".amr", ".aac", ".flac", ".3gp",
    ".caf", ".mpga",
];

/// Whether a file of `mime` named `name` is audio to transcribe.
pub fn is_audio(mime: Option<&str>, name: &str) -> bool {
    let mime = mime.unwrap_or_default().to_ascii_lowercase();
    if mime.starts_with("audio/") {
        return true;
    }
    let name = name.to_ascii_lowercase();
    (mime.is_empty() || mime == "application/octet-stream")
        && AUDIO_ENDINGS.iter().any(|ending| name.ends_with(ending))
}

/// Transcripts by the audio's SHA-256, and their keys oldest first.
type Remembered = (HashMap<[u8; 32], Transcript>, VecDeque<[u8; 32]>);

/// The transcriber with a memory of what it transcribed, shared by a channel's messages.
pub struct VoiceNotes {
    transcriber: Arc<dyn Transcriber>,
    /// Transcripts by the audio's SHA-256, oldest first out. A std mutex: held only to look
    /// up or insert, never across the transcription.
    remembered: Mutex<Remembered>,
}

impl VoiceNotes {
    /// Voice notes transcribed by `transcriber`.
    pub fn new(transcriber: Arc<dyn Transcriber>) -> Self {
        Self {
            transcriber,
            remembered: Mutex::default(),
        }
    }

    /// What was said in `audio`: remembered if the same recording was transcribed before (a
    /// redelivered event, an edit that keeps the file), else asked of the transcriber.
    pub async fn transcribe(&self, audio: Audio) -> Result<Transcript, TranscriptionError> {
        let key: [u8; 32] = Sha256::digest(&audio.bytes).into();
        if let Ok(remembered) = self.remembered.lock()
            && let Some(transcript) = remembered.0.get(&key)
        {
            tracing::debug!(
                file = %audio.file_name,
                "A voice note transcribed before; its transcript is reused."
            );
            return Ok(transcript.clone());
        }
        let started = std::time::Instant::now();
        let transcript = self.transcriber.transcribe(audio).await;
        match &transcript {
            Ok(transcript) => {
                tracing::info!(
                    seconds = transcript.seconds,
                    took_ms = started.elapsed().as_millis() as u64,
                    "Transcribed a voice note."
                );
                if let Ok(mut remembered) = self.remembered.lock() {
                    let (map, order) = &mut *remembered;
                    if map.insert(key, transcript.clone()).is_none() {
                        order.push_back(key);
                    }
                    while order.len() > REMEMBERED {
                        if let Some(oldest) = order.pop_front() {
                            map.remove(&oldest);
                        }
                    }
                }
            }
            Err(error) => {
                tracing::warn!(kind = ?error.kind, error = %error, "A voice note could not be transcribed.");
            }
        }
        transcript
    }
}

/// Per conversation, the task handing over its latest voice note and whatever waits behind it,
/// so a conversation's messages reach the router in the order they came while a transcription
/// holds only that conversation. A std mutex: held only to swap a handle.
#[derive(Default)]
pub struct Chains(Mutex<HashMap<String, JoinHandle<()>>>);

impl Chains {
    /// The conversation's unfinished task, if any, taken: the caller's task waits for it and
    /// takes its place with [`Self::set`].
    pub fn take(&self, conversation: &str) -> Option<JoinHandle<()>> {
        let mut chains = self.0.lock().ok()?;
        chains.retain(|_, handle| !handle.is_finished());
        chains.remove(conversation)
    }

    /// `handle` is now the conversation's latest.
    pub fn set(&self, conversation: String, handle: JoinHandle<()>) {
        if let Ok(mut chains) = self.0.lock() {
            chains.insert(conversation, handle);
        }
    }
}

/// What the model gets for a voice note saved at `path`: the words, marked as transcribed
/// from it, or that it could not be transcribed and why.
pub fn told(outcome: &Result<Transcript, TranscriptionError>, path: &str) -> String {
    match outcome {
        Ok(transcript) if transcript.text.trim().is_empty() => format!(
            "[A voice note in which no words were recognised; the audio is saved at {path}]"
        ),
        Ok(transcript) => format!(
            "[Voice note, transcribed ({:.0} s); the audio is saved at {path}]\n{}",
            transcript.seconds, transcript.text
        ),
        Err(error) => format!(
            "[A voice note that could not be transcribed ({error}); the person has been told \
             why; the audio is saved at {path}]"
        ),
    }
}

/// What the person is told when their voice note could not be transcribed.
pub fn failure_note(error: &TranscriptionError) -> String {
    format!(
        "(I could not transcribe your voice note: {error}. I kept the recording; you can type \
         your message or send the voice note again.)"
    )
}

/// A reply sink that puts a note at the top of the turn's first reply: the reason a voice note
/// could not be transcribed, said whatever the model answers.
pub struct NotedReply {
    inner: Arc<dyn ReplySink>,
    /// Taken by the first delivery. A std mutex: held only to take it.
    note: Mutex<Option<String>>,
}

impl NotedReply {
    /// `inner`, its first reply preceded by `note`.
    pub fn new(inner: Arc<dyn ReplySink>, note: String) -> Self {
        Self {
            inner,
            note: Mutex::new(Some(note)),
        }
    }
}

#[async_trait]
impl ReplySink for NotedReply {
    async fn typing(&self, active: bool) {
        self.inner.typing(active).await;
    }

    async fn deliver(&self, text: &str) -> Result<(), DeliveryError> {
        let note = self.note.lock().ok().and_then(|mut note| note.take());
        match note {
            Some(note) => self.inner.deliver(&format!("{note}\n\n{text}")).await,
            None => self.inner.deliver(text).await,
        }
    }

    async fn ask(&self, request: &ApprovalRequest) -> Result<bool, DeliveryError> {
        self.inner.ask(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ports::channel::CollectingSink;
    use crate::transcription::TranscriptionErrorKind;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize);

    #[async_trait]
    impl Transcriber for Counting {
        async fn transcribe(&self, audio: Audio) -> Result<Transcript, TranscriptionError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            if audio.bytes == b"bad" {
                return Err(TranscriptionError::new(
                    TranscriptionErrorKind::Rejected,
                    "the transcription service answered 400: bad audio",
                ));
            }
            Ok(Transcript {
                text: "hello there".into(),
                seconds: 2.0,
            })
        }
    }

    fn audio(bytes: &[u8]) -> Audio {
        Audio {
            bytes: bytes.to_vec(),
            file_name: "note.ogg".into(),
            mime: Some("audio/ogg".into()),
            duration: None,
            session: None,
        }
    }

    #[tokio::test]
    async fn the_same_recording_is_transcribed_once_and_a_failure_is_asked_again() {
        let counting = Arc::new(Counting(AtomicUsize::new(0)));
        let notes = VoiceNotes::new(counting.clone());
        for _ in 0..3 {
            let transcript = notes.transcribe(audio(b"OggS voice")).await;
            assert_eq!(transcript.map(|t| t.text).as_deref(), Ok("hello there"));
        }
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
        assert!(notes.transcribe(audio(b"bad")).await.is_err());
        assert!(notes.transcribe(audio(b"bad")).await.is_err());
        assert_eq!(counting.0.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn audio_is_told_by_its_type_or_a_voice_memo_ending() {
        assert!(is_audio(Some("audio/ogg"), "x"));
        assert!(is_audio(Some("Audio/MP4"), "x"));
        assert!(is_audio(Some("application/octet-stream"), "Memo 12.M4A"));
        assert!(is_audio(None, "voice.opus"));
        assert!(!is_audio(Some("application/pdf"), "x.wav.pdf"));
        assert!(!is_audio(Some("text/plain"), "notes.wav"));
        assert!(!is_audio(None, "photo.jpg"));
    }

    #[tokio::test]
    async fn a_failure_note_tops_the_first_reply_only() {
        let collecting = Arc::new(CollectingSink::new());
        let error = TranscriptionError::new(
            TranscriptionErrorKind::Timeout,
            "the transcription service took longer than 5 s",
        );
        let noted = NotedReply::new(collecting.clone(), failure_note(&error));
        noted.deliver("An answer.").await.unwrap();
        noted.deliver("A second.").await.unwrap();
        let delivered = collecting.delivered();
        assert!(delivered[0].starts_with("(I could not transcribe your voice note: the transcription service took longer than 5 s."), "{delivered:?}");
        assert!(delivered[0].ends_with("\n\nAn answer."));
        assert_eq!(delivered[1], "A second.");
        assert!(told(&Err(error), "/w/a.ogg").contains("could not be transcribed"));
    }
}
