//! Benchmark: `search_history` over 1 000 000 messages, index versus a linear scan.
//!
//! Writes 1 000 sessions of 1 000 JSONL messages each (ordinary words, plus rare marker words
//! sprinkled in so queries return some hits), builds the history index from scratch (reporting
//! the build time), then runs 50 queries through `HistoryIndex::update` + `search` (the work of
//! one tool call) and reports the median: keyword queries and questions as a person asks them
//! (whose common words the ranking must wade through). Queries made only of words that are in a
//! third of all messages are the worst case, reported on their own. A linear scan, the original's approach (read every
//! JSONL file, parse each line, case-insensitive substring match, newest first), runs a few of
//! the same queries; the report gives its median and the ratio. Targets: index median <= 20 ms
//! and >= 50x faster than the scan.
//!
//! Run: `cargo bench --bench search_history` (set `SEARCH_BENCH_MESSAGES` for another size).

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use squidbot::core::message::{Message, Role};
use squidbot::core::session::SessionId;
use squidbot::storage::history_index::SearchRequest;
use squidbot::storage::{HistoryIndex, safe_id};

const SESSIONS: u64 = 1_000;
const WORDS: &[&str] = &[
    "the", "meeting", "project", "deploy", "server", "coffee", "tomorrow", "please", "check",
    "report", "budget", "release", "notes", "weather", "train", "dinner", "review", "ticket",
    "update", "backup", "garden", "invoice", "music", "travel", "doctor", "family", "weekend",
];
/// Marker words and how often (1 in N messages) each appears.
const MARKERS: &[(&str, u32)] = &[
    ("zanzibar", 100_000),
    ("quokka", 20_000),
    ("xylophone", 5_000),
    ("marmalade", 1_000),
];

fn base() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2024-01-01T00:00:00Z")
        .unwrap()
        .to_utc()
}

fn write_history(home: &Path, total: u64) {
    let dir = home.join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let per_session = total / SESSIONS;
    let mut rng = fastrand::Rng::with_seed(7);
    for s in 0..SESSIONS {
        let session = SessionId::parse(&format!("matrix:!room{s}:example.org")).unwrap();
        let path = dir.join(format!("{}.jsonl", safe_id::encode(&session)));
        let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
        for i in 0..per_session {
            let mut words: Vec<&str> = (0..10).map(|_| WORDS[rng.usize(..WORDS.len())]).collect();
            for (marker, every) in MARKERS {
                if rng.u32(..*every) == 0 {
                    words.push(marker);
                }
            }
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let seconds = (i * SESSIONS + s) as i64 * 30;
            let ts = (base() + chrono::Duration::seconds(seconds)).fixed_offset();
            let message = Message::new(role, words.join(" "), ts);
            serde_json::to_writer(&mut out, &message).unwrap();
            out.write_all(b"\n").unwrap();
        }
    }
}

/// The original's approach: every file, every line, substring match, newest first.
fn linear_scan(home: &Path, query: &str, max: usize) -> Vec<(DateTime<Utc>, String)> {
    let needle = query.to_lowercase();
    let mut found = Vec::new();
    for entry in std::fs::read_dir(home.join("sessions")).unwrap() {
        let path = entry.unwrap().path();
        let reader = BufReader::new(std::fs::File::open(&path).unwrap());
        for line in reader.lines() {
            let Ok(message) = serde_json::from_str::<Message>(&line.unwrap()) else {
                continue;
            };
            if matches!(message.role, Role::User | Role::Assistant)
                && message.content.to_lowercase().contains(&needle)
            {
                found.push((message.timestamp.to_utc(), message.content));
            }
        }
    }
    found.sort_by_key(|item| std::cmp::Reverse(item.0));
    found.truncate(max);
    found
}

fn request(query: &str) -> SearchRequest {
    SearchRequest {
        query: query.to_owned(),
        max: 10,
        ..SearchRequest::default()
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn main() {
    let total: u64 = std::env::var("SEARCH_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let home = tempfile::tempdir().unwrap();
    let started = Instant::now();
    write_history(home.path(), total);
    println!(
        "wrote {total} messages in {SESSIONS} sessions: {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let index = HistoryIndex::open(home.path()).unwrap();
    let added = index.update().unwrap();
    let db_size = std::fs::metadata(index.path())
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "index build: {added} messages indexed in {:.1} s ({:.0} MB)",
        started.elapsed().as_secs_f64(),
        db_size as f64 / 1e6
    );

    let now = base() + chrono::Duration::seconds(total as i64 * 30) + chrono::Duration::hours(1);
    let queries = [
        "zanzibar",
        "quokka",
        "xylophone",
        "marmalade",
        "Quokka coffee",
        "when did we talk about the zanzibar trip?",
        "what did the quokka do at the weekend",
        "do you remember the xylophone and the music?",
        "Who made the marmalade for dinner?",
        "did the quokka review the release notes",
    ];
    let mut times = Vec::new();
    let mut hits_seen = 0;
    for round in 0..queries.len() * 5 {
        let query = queries[round % queries.len()];
        let started = Instant::now();
        index.update().unwrap();
        let hits = index.search(&request(query)).unwrap();
        times.push(started.elapsed());
        hits_seen += hits.len();
    }
    let index_median = median(times);
    println!(
        "index query (update + search, max 10, {} queries, {hits_seen} hits): median {:.2} ms",
        queries.len() * 5,
        ms(index_median)
    );
    for (label, query, days) in [
        ("common word", "coffee", 0),
        ("common word, 30 days", "coffee", 30),
        (
            "common words only",
            "what about the coffee and the weather?",
            0,
        ),
    ] {
        let started = Instant::now();
        index.update().unwrap();
        let hits = index
            .search(&SearchRequest {
                since: (days > 0).then(|| now - chrono::Duration::days(days)),
                ..request(query)
            })
            .unwrap();
        println!(
            "index query, {label} ({query:?}, {} hits returned): {:.2} ms",
            hits.len(),
            ms(started.elapsed())
        );
    }

    let mut scan_times = Vec::new();
    for query in ["zanzibar", "quokka", "marmalade"] {
        let started = Instant::now();
        let scan = linear_scan(home.path(), query, 10);
        scan_times.push(started.elapsed());
        println!(
            "linear scan {query:?}: {:.0} ms, {} hits",
            ms(*scan_times.last().unwrap()),
            scan.len()
        );
    }
    let scan_median = median(scan_times);
    println!("linear scan median: {:.0} ms", ms(scan_median));
    println!(
        "RESULT: index median {:.2} ms (target <= 20 ms); {:.0}x faster than the linear scan (target >= 50x)",
        ms(index_median),
        scan_median.as_secs_f64() / index_median.as_secs_f64()
    );
}
