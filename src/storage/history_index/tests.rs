//! Tests of the history index: order, context, windows, query safety and cache rebuilds.

use std::io::Write;
use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use super::*;
use crate::core::session::SessionId;
use crate::storage::safe_id;
use crate::tools::search_history::format_hits;

fn base() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z")
        .unwrap()
        .to_utc()
}

fn file(home: &Path, session: &str) -> std::path::PathBuf {
    let dir = home.join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let stem = safe_id::encode(&SessionId::parse(session).unwrap());
    dir.join(format!("{stem}.jsonl"))
}

/// Appends `(role, content, minutes after base)` records to `session`'s JSONL.
fn append(home: &Path, session: &str, records: &[(&str, &str, i64)]) {
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file(home, session))
        .unwrap();
    for (role, content, minutes) in records {
        let ts = (base() + Duration::minutes(*minutes)).fixed_offset();
        let line = json!({"role": role, "content": content, "timestamp": ts.to_rfc3339()});
        writeln!(out, "{line}").unwrap();
    }
}

fn search(index: &HistoryIndex, query: &str) -> Vec<Hit> {
    index.update().unwrap();
    index
        .search(query, 0, 50, base() + Duration::days(1))
        .unwrap()
}

fn contents(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.message.content.as_str()).collect()
}

#[test]
fn newest_first_across_sessions() {
    let home = tempfile::tempdir().unwrap();
    append(
        home.path(),
        "cli:local",
        &[("user", "apple one", 1), ("assistant", "apple three", 3)],
    );
    append(
        home.path(),
        "matrix:!r:x",
        &[("user", "apple two", 2), ("user", "apple four", 4)],
    );
    let index = HistoryIndex::open(home.path()).unwrap();
    let hits = search(&index, "apple");
    assert_eq!(
        contents(&hits),
        ["apple four", "apple three", "apple two", "apple one"]
    );
    assert_eq!(hits[0].session, "matrix:!r:x");
    assert_eq!(hits[1].session, "cli:local");
}

#[test]
fn context_is_the_neighbours_in_the_same_session_without_tool_messages() {
    let home = tempfile::tempdir().unwrap();
    append(
        home.path(),
        "cli:local",
        &[
            ("user", "first", 1),
            ("assistant", "", 2),
            ("tool", "tool output banana", 3),
            ("assistant", "the banana answer", 4),
            ("user", "thanks", 5),
        ],
    );
    append(home.path(), "cli:other", &[("user", "unrelated", 4)]);
    let index = HistoryIndex::open(home.path()).unwrap();
    let hits = search(&index, "banana");
    assert_eq!(contents(&hits), ["the banana answer"]);
    assert_eq!(hits[0].before.as_ref().unwrap().content, "first");
    assert_eq!(hits[0].after.as_ref().unwrap().content, "thanks");
    let hits = search(&index, "first");
    assert!(hits[0].before.is_none());
    let text = format_hits("banana", &search(&index, "banana"));
    assert!(text.starts_with("## Match 1 — [cli:local] | 2026-03-01 12:04\nUSER: first\n**ASSISTANT: the banana answer**\nUSER: thanks\n---\n"), "{text}");
    assert_eq!(format_hits("kiwi", &[]), "No matches found for 'kiwi'.");
}

#[test]
fn long_messages_are_cut_to_300_chars() {
    let home = tempfile::tempdir().unwrap();
    let long = format!("needle {}", "é".repeat(400));
    append(home.path(), "cli:local", &[("user", &long, 1)]);
    let index = HistoryIndex::open(home.path()).unwrap();
    let text = format_hits("needle", &search(&index, "needle"));
    let hit = text.lines().nth(1).unwrap();
    assert_eq!(hit.chars().count(), "**USER: ".len() + 300 + "...**".len());
}

#[test]
fn days_window_and_cap() {
    let home = tempfile::tempdir().unwrap();
    let records: Vec<(String, i64)> = (0..60)
        .map(|i| (format!("note {i}"), i * 24 * 60))
        .collect();
    let records: Vec<(&str, &str, i64)> = records
        .iter()
        .map(|(c, m)| ("user", c.as_str(), *m))
        .collect();
    append(home.path(), "cli:local", &records);
    let index = HistoryIndex::open(home.path()).unwrap();
    index.update().unwrap();
    let now = base() + Duration::days(59) + Duration::hours(1);
    let recent = index.search("note", 3, 50, now).unwrap();
    assert_eq!(contents(&recent), ["note 59", "note 58", "note 57"]);
    assert_eq!(index.search("note", 0, 5, now).unwrap().len(), 5);
    assert_eq!(index.search("note", 0, 500, now).unwrap().len(), 50);
    assert_eq!(index.search("note", 0, 0, now).unwrap().len(), 1);
}

#[test]
fn case_insensitive_words_prefixes_and_phrases() {
    let home = tempfile::tempdir().unwrap();
    append(
        home.path(),
        "cli:local",
        &[
            ("user", "Deployment of the Rocket went fine", 1),
            ("user", "the fine rocket", 2),
        ],
    );
    let index = HistoryIndex::open(home.path()).unwrap();
    assert_eq!(search(&index, "ROCKET").len(), 2);
    assert_eq!(
        contents(&search(&index, "deploy")),
        ["Deployment of the Rocket went fine"]
    );
    assert_eq!(
        contents(&search(&index, "\"fine rocket\"")),
        ["the fine rocket"]
    );
    assert_eq!(
        contents(&search(&index, "rocket went")),
        ["Deployment of the Rocket went fine"]
    );
    assert!(search(&index, "rocket missing").is_empty());
}

#[test]
fn fts_syntax_in_the_query_is_harmless() {
    let home = tempfile::tempdir().unwrap();
    append(
        home.path(),
        "cli:local",
        &[("user", "and or not near: a-b c*d \"q\"", 1)],
    );
    let index = HistoryIndex::open(home.path()).unwrap();
    for query in [
        "\"",
        "*",
        "AND",
        "-",
        ":",
        "a AND",
        "OR NOT",
        "NEAR(a b)",
        "\"unclosed",
        "col:a",
        "a-b",
        "c*d",
        "^a",
        "(",
        ")",
        "{a}",
        "'",
        "+",
        "\"\"\"",
    ] {
        let hits = index
            .update()
            .and_then(|_| index.search(query, 0, 10, base()));
        assert!(hits.is_ok(), "{query}: {hits:?}");
    }
    assert_eq!(search(&index, "a-b").len(), 1);
    assert_eq!(search(&index, "AND").len(), 1);
    assert_eq!(fts_query("a\"b c\""), Some("\"a\"* AND \"b c\"".to_owned()));
    assert_eq!(fts_query("*:-"), None);
}

#[test]
fn incremental_update_reads_only_appended_lines() {
    let home = tempfile::tempdir().unwrap();
    append(home.path(), "cli:local", &[("user", "alpha", 1)]);
    let index = HistoryIndex::open(home.path()).unwrap();
    assert_eq!(index.update().unwrap(), 1);
    assert_eq!(index.update().unwrap(), 0);
    append(home.path(), "cli:local", &[("assistant", "alpha again", 2)]);
    // A torn last line (no newline yet) waits for the next update.
    let mut out = std::fs::OpenOptions::new()
        .append(true)
        .open(file(home.path(), "cli:local"))
        .unwrap();
    write!(out, "{{\"role\":\"user\",\"content\":\"alpha tor").unwrap();
    assert_eq!(index.update().unwrap(), 1);
    let hits = search(&index, "alpha");
    assert_eq!(contents(&hits), ["alpha again", "alpha"]);
    assert_eq!(hits[1].after.as_ref().unwrap().content, "alpha again");
}

#[test]
fn rebuilt_after_the_index_is_deleted_or_corrupted() {
    let home = tempfile::tempdir().unwrap();
    append(home.path(), "cli:local", &[("user", "durable fact", 1)]);
    let index = HistoryIndex::open(home.path()).unwrap();
    assert_eq!(search(&index, "durable").len(), 1);
    let path = index.path().to_owned();
    drop(index);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    std::fs::write(&path, b"this is not a database, just garbage bytes....").unwrap();
    let index = HistoryIndex::open(home.path()).unwrap();
    assert_eq!(search(&index, "durable").len(), 1);
    // Deleted while open: recreated by the next update.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(search(&index, "durable").len(), 1);
    assert!(path.exists());
}

#[test]
fn truncated_or_replaced_file_is_reindexed() {
    let home = tempfile::tempdir().unwrap();
    append(
        home.path(),
        "cli:local",
        &[("user", "old words", 1), ("user", "old more", 2)],
    );
    let index = HistoryIndex::open(home.path()).unwrap();
    assert_eq!(search(&index, "old").len(), 2);
    // Truncated and rewritten in place, longer than before.
    std::fs::write(file(home.path(), "cli:local"), b"").unwrap();
    append(
        home.path(),
        "cli:local",
        &[
            ("user", "new words here", 1),
            ("user", "new more words here", 2),
            ("user", "x", 3),
        ],
    );
    assert!(search(&index, "old").is_empty());
    assert_eq!(search(&index, "new").len(), 2);
    // Replaced by another file (new inode).
    let path = file(home.path(), "cli:local");
    let replacement = path.with_extension("tmp");
    std::fs::write(&replacement, b"").unwrap();
    std::fs::rename(&replacement, &path).unwrap();
    append(home.path(), "cli:local", &[("user", "fresh", 1)]);
    assert!(search(&index, "new").is_empty());
    assert_eq!(search(&index, "fresh").len(), 1);
    // Deleted: its messages disappear.
    std::fs::remove_file(&path).unwrap();
    assert!(search(&index, "fresh").is_empty());
}
