//! Fuzzes the JSONL history loader, `squidbot::storage::jsonl_store::parse_history`: the one
//! rule by which a session file's bytes become messages (torn and unreadable lines skipped).
//!
//! Invariants checked on every input, beyond "never panics":
//! - never more messages plus skipped lines than the input has lines;
//! - every message's `end_offset` lies just past a `\n` of the input, strictly increasing;
//! - a crash can only cut the file short, and the history of any prefix is a prefix of the
//!   history (checked at a few cut points);
//! - every loaded message, written back the way the store appends it, loads as the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squidbot::storage::jsonl_store::parse_history;

fuzz_target!(|data: &[u8]| {
    let (messages, skipped) = parse_history(data, 0).expect("reading a slice cannot fail");

    let newlines = data.iter().filter(|&&b| b == b'\n').count();
    let lines = newlines + usize::from(data.last().is_some_and(|&b| b != b'\n'));
    assert!(
        messages.len() + skipped <= lines,
        "{} messages + {skipped} skipped from {lines} lines",
        messages.len()
    );

    let mut previous = 0u64;
    for stored in &messages {
        let end = usize::try_from(stored.end_offset).expect("offset fits usize");
        assert!(
            end > 0 && end <= data.len(),
            "end_offset {end} outside the input"
        );
        assert!(stored.end_offset > previous, "end offsets not increasing");
        assert_eq!(
            data[end - 1],
            b'\n',
            "end_offset {end} is not just past a newline"
        );
        previous = stored.end_offset;
    }

    for cut in [data.len() / 3, data.len() / 2, data.len() * 5 / 6] {
        let (prefix, _) = parse_history(&data[..cut], 0).expect("reading a slice cannot fail");
        assert!(
            prefix.len() <= messages.len(),
            "a prefix of the file has more messages"
        );
        assert_eq!(
            prefix[..],
            messages[..prefix.len()],
            "cut at {cut} changed earlier messages"
        );
    }

    for stored in &messages {
        let mut line = serde_json::to_vec(&stored.message).expect("a message serializes");
        line.push(b'\n');
        let (again, skipped) = parse_history(&line[..], 0).expect("reading a slice cannot fail");
        assert_eq!(
            skipped,
            0,
            "a written message did not load: {}",
            String::from_utf8_lossy(&line)
        );
        assert_eq!(again.len(), 1);
        assert_eq!(
            again[0].message, stored.message,
            "a message changed on its way back"
        );
    }
});
