//! What the crash and fault suites share about consolidation: a scripted summarizer whose
//! summaries say how far they reach, the text of the last user message (which the model
//! echoes or summarizes), and the check, over the files on disk, that a session's cursor never
//! points past what its summary.md covers.
//!
//! Both suites prove that same invariant (one under SIGKILL, one under LLM faults), so it is
//! written once: a fix to how it is read holds for both.

use std::path::Path;

use serde_json::Value;
use squidbot::core::session::SessionId;
use squidbot::storage::cursor_file::CursorFile;
use squidbot::storage::safe_id;

use crate::support::scripted_llm::{Reply, last_user_text};

/// What squidbot appends to the newest message of a request after two line breaks (MEMORY.md
/// changed since the prompt's copy, consolidation coming): notes of the request, not the
/// person's words.
const NOTE_MARK: &str = "\n\n[System: ";

/// What the person said in the request's newest user message, without the notes squidbot
/// pinned to it: what the scripted model echoes and what a reply is checked against.
pub fn said(request: &Value) -> String {
    let text = last_user_text(request);
    match text.find(NOTE_MARK) {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// The first words of the consolidation system prompt.
const SUMMARY_MARK: &str = "You are a memory consolidation assistant. You write";
/// The first words shared by the consolidation and meta-consolidation system prompts.
const CONSOLIDATION_MARK: &str = "You are a memory consolidation assistant.";

/// The scripted answer to a consolidation request, `None` for any other request: a summary
/// names the last user message of the transcript it was given ("through <text>"), which is
/// what lets [`summarized`] tell whether the cursor ran past it.
pub fn summary_reply(request: &Value) -> Option<Reply> {
    let messages = request["messages"].as_array()?;
    let system = messages.first()?["content"].as_str().unwrap_or_default();
    if system.starts_with(SUMMARY_MARK) {
        let transcript = last_user_text(request);
        let last = transcript
            .lines()
            .filter_map(|l| l.strip_prefix("user: "))
            .next_back()
            .unwrap_or("nothing");
        return Some(Reply::Text(format!("Summary through <{last}>.")));
    }
    system
        .starts_with(CONSOLIDATION_MARK)
        .then(|| Reply::Text("Compact summary.".to_owned()))
}

/// The messages of one history file (none when there is no file) and how many torn lines it
/// holds. A kill mid-append leaves a torn last line; the next append closes it with a newline,
/// so it stays an isolated, skipped line in the middle.
pub fn read_history(path: &Path) -> (Vec<Value>, usize) {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{}: {e}", path.display()),
    };
    let mut messages = Vec::new();
    let mut torn = 0;
    for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<Value>(line) {
            Ok(message) => messages.push(message),
            Err(_) => torn += 1,
        }
    }
    (messages, torn)
}

/// How many of `messages` (the history of `session` in `home`) the session's cursor says
/// summary.md covers, 0 without a cursor; fails the test when the cursor points past the
/// history, or when summary.md does not name the last user message the cursor covers.
pub fn summarized(home: &Path, session: &SessionId, messages: &[Value]) -> u64 {
    let stem = safe_id::encode(session);
    let cursor_path = home.join("sessions").join(format!("{stem}.meta.json"));
    let Ok(bytes) = std::fs::read(&cursor_path) else {
        return 0;
    };
    let summary = std::fs::read_to_string(home.join("memory").join(&stem).join("summary.md"))
        .unwrap_or_default();
    let cursor: CursorFile =
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", cursor_path.display()));
    let (cursor, _) = cursor.recover(&summary);
    let covered = usize::try_from(cursor.last_consolidated).unwrap();
    assert!(
        covered <= messages.len(),
        "{session}: the cursor ({covered}) is past the history ({} messages)",
        messages.len()
    );
    if covered > 0 {
        let last_user = messages[..covered]
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or("nothing");
        assert!(
            summary.contains(&format!("through <{last_user}>")),
            "{session}: the cursor covers {covered} messages up to {last_user:?}, but \
             summary.md does not:\n{summary}"
        );
    }
    cursor.last_consolidated
}
