//! Benchmark: building a turn's prompt for sessions of 1 000, 100 000 and 1 000 000 messages
//! with the cursor near the end.
//!
//! The claim under test is that a turn costs time proportional to the unconsolidated tail, not
//! to the whole history: the largest session must build within 2x of the smallest. Each run
//! writes a real JSONL history and cursor file, then times `load_tail` plus prompt assembly
//! (`MemoryManager::prompt`) through the production `JsonlStore`. It also reports the one-time
//! cost of the first load of a cursor file in the original's format (no byte offset), which
//! scans the history once and then records the offset.
//!
//! Run: `cargo bench --bench prompt_build` (add `-- --quick` for fewer iterations).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use squidbot::core::audience::Audience;
use squidbot::core::memory_manager::{MemoryManager, MemorySettings};
use squidbot::core::message::{Message, Role};
use squidbot::core::ports::prompt::{FixedPrompt, PromptSections};
use squidbot::core::session::SessionId;
use squidbot::storage::{JsonlStore, MemoryFile, safe_id};

/// Messages after the cursor (the unconsolidated tail).
const TAIL: u64 = 60;

fn write_session(home: &Path, session: &SessionId, total: u64, with_offset: bool) -> u64 {
    let sessions = home.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let stem = safe_id::encode(session);
    let file = std::fs::File::create(sessions.join(format!("{stem}.jsonl"))).unwrap();
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let ts = chrono::DateTime::parse_from_rfc3339("2026-11-22T10:00:00+01:00").unwrap();
    let cursor = total - TAIL;
    let (mut written, mut offset) = (0u64, 0u64);
    for i in 0..total {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        let mut message = Message::new(
            role,
            format!("message number {i}: a sentence of ordinary length about the day's plans."),
            ts,
        );
        message.channel = Some("bench".into());
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        out.write_all(&line).unwrap();
        written += line.len() as u64;
        if i + 1 == cursor {
            offset = written;
        }
    }
    out.flush().unwrap();
    let meta = if with_offset {
        format!(r#"{{"last_consolidated":{cursor},"offset":{offset}}}"#)
    } else {
        format!(r#"{{"last_consolidated":{cursor}}}"#)
    };
    std::fs::write(sessions.join(format!("{stem}.meta.json")), meta).unwrap();
    let summary_dir = home.join("memory").join(&stem);
    std::fs::create_dir_all(&summary_dir).unwrap();
    std::fs::write(
        summary_dir.join("summary.md"),
        "The owner plans a trip to Lisbon in May.",
    )
    .unwrap();
    written
}

fn manager(home: &Path) -> MemoryManager {
    let prompt = FixedPrompt(PromptSections {
        base: "You are squidbot.".into(),
        ..PromptSections::default()
    });
    MemoryManager::new(
        Arc::new(JsonlStore::new(home)),
        Arc::new(MemoryFile::new(&home.join("workspace"))),
        Arc::new(prompt),
        None,
        MemorySettings::default(),
    )
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Times prompt builds; `cold` builds a fresh manager (and store, so an empty tail cache) for
/// each one, which measures the disk path: seek to the cursor, read and parse the tail.
async fn time_prompt(
    home: &Path,
    manager: &MemoryManager,
    session: &SessionId,
    iterations: usize,
    cold: bool,
) -> Duration {
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let fresh;
        let manager = if cold {
            fresh = self::manager(home);
            &fresh
        } else {
            manager
        };
        let start = Instant::now();
        let tail = manager.load_tail(session).await.unwrap();
        let prompt = manager
            .prompt(
                session,
                &tail,
                None,
                chrono::Utc::now().fixed_offset(),
                Audience::Owner,
            )
            .await
            .unwrap();
        samples.push(start.elapsed());
        assert_eq!(prompt.len() as u64, TAIL + 1);
    }
    median(samples)
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let iterations = if quick { 50 } else { 400 };
    let dir = tempfile::tempdir().unwrap();
    let mut results = Vec::new();
    println!(
        "prompt_build: median of {iterations} builds, tail of {TAIL} messages after the cursor"
    );
    for total in [1_000u64, 100_000, 1_000_000] {
        let home = dir.path().join(format!("h{total}"));
        let session = SessionId::new("bench", &total.to_string()).unwrap();
        let bytes = write_session(&home, &session, total, true);
        let manager = manager(&home);
        time_prompt(&home, &manager, &session, 5, true).await;
        let cold = time_prompt(&home, &manager, &session, iterations, true).await;
        let warm = time_prompt(&home, &manager, &session, iterations, false).await;
        println!(
            "  {total:>9} messages ({:>6.1} MiB): cold {:>7.1} µs (read from disk), warm {:>6.1} µs (tail cached)",
            bytes as f64 / 1048576.0,
            cold.as_secs_f64() * 1e6,
            warm.as_secs_f64() * 1e6
        );
        results.push(cold);
    }
    let ratio = results[2].as_secs_f64() / results[0].as_secs_f64();
    println!("  ratio 1M / 1k, cold: {ratio:.2}x (target <= 2x)");

    let home = dir.path().join("legacy");
    let session = SessionId::new("bench", "legacy").unwrap();
    write_session(&home, &session, 1_000_000, false);
    let manager = manager(&home);
    let start = Instant::now();
    manager.load_tail(&session).await.unwrap();
    let first = start.elapsed();
    let after = time_prompt(&home, &manager, &session, iterations.min(100), true).await;
    println!(
        "  original-format cursor (no offset), 1M messages: first load {:.1} ms (one scan, offset recorded), then {:.1} µs",
        first.as_secs_f64() * 1e3,
        after.as_secs_f64() * 1e6
    );
}
