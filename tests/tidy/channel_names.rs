//! The rule that keeps channels out of core: no production code in `src/core` has a channel's
//! name as a string (each channel's plug-in in `src/channels` says it), with the planted
//! violations that show the rule can fail.

use super::{code_only, files_under, is_test_file, report, without_test_items};

/// The channels' names: core spells none of them, so it cannot decide by one (a channel's
/// routing keys, owner ids and names live in its folder under `src/channels`).
const CHANNEL_NAMES: &[&str] = &["matrix", "email", "mail", "http", "heartbeat"];

/// Literals in core that equal a channel's name but name something else, with why.
const CHANNEL_NAME_ALLOWED: &[(&str, &str)] = &[
    // The sender id of a heartbeat turn in the history, the original's record format: the
    // origin, not the channel (`Origin::Heartbeat`).
    ("src/core/origin.rs", "heartbeat"),
    // The ledger's purpose label of a heartbeat tick.
    ("src/core/ports/usage.rs", "heartbeat"),
];

/// The string literals of one line of code, as written (escapes not decoded).
fn literals_of(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut literal = String::new();
        while let Some(inner) = chars.next() {
            match inner {
                '\\' => {
                    literal.push(inner);
                    literal.extend(chars.next());
                }
                '"' => break,
                _ => literal.push(inner),
            }
        }
        found.push(literal);
    }
    found
}

/// Problems: a string literal in production code that is a channel's name, a session of one
/// (`matrix:…`) or one of its keys (`email_subject`).
fn check_channel_names(rel: &str, text: &str) -> Vec<String> {
    let code = without_test_items(&code_only(text));
    let mut problems = Vec::new();
    for (n, (code_line, line)) in code.lines().zip(text.lines()).enumerate() {
        if !code_line.contains('"') {
            continue;
        }
        let line = line.split(" //").next().unwrap_or(line);
        for literal in literals_of(line) {
            let lower = literal.to_ascii_lowercase();
            let named = CHANNEL_NAMES.iter().find(|name| {
                lower == **name
                    || lower.starts_with(&format!("{name}:"))
                    || lower.starts_with(&format!("{name}_"))
            });
            let allowed = CHANNEL_NAME_ALLOWED.contains(&(rel, literal.as_str()));
            if let Some(name) = named
                && !allowed
            {
                problems.push(format!(
                    "{rel}:{}: {:?} names the {name} channel",
                    n + 1,
                    literal
                ));
            }
        }
    }
    problems
}

#[test]
fn core_names_no_channel() {
    let problems = files_under(&["src/core"])
        .iter()
        .filter(|(rel, _)| !is_test_file(rel))
        .flat_map(|(rel, text)| check_channel_names(rel, text))
        .collect();
    report(
        "a channel's name in core (its plug-in in src/channels says it)",
        problems,
    );
}

#[test]
fn the_channel_name_check_catches_planted_violations() {
    // A channel's name, session or routing key as a string in core; comments, tests, other
    // words and the allowed origin label are fine.
    for planted in [
        "fn f(s: &SessionId) -> bool { s.channel() == \"matrix\" }",
        "let id = SessionId::new(\"email\", &key);",
        "const ROOM: &str = \"matrix_room_id\";",
        "let s = format!(\"x\") + \"Mail\";",
        "if target.starts_with(\"http:\") {}",
        "let h = \"heartbeat\";",
    ] {
        assert_eq!(
            check_channel_names("src/core/x.rs", planted).len(),
            1,
            "{planted}"
        );
    }
    for fine in [
        "// channel == \"matrix\"",
        "/// Sessions such as `\"email:a@b\"`.",
        "#[cfg(test)]\nfn t() { SessionId::new(\"matrix\", \"!r:x\"); }",
        "let url = \"https://example.org\"; let m = \"mailbox\";",
        "fn f() -> &'static str { \"heartbeat\" }",
    ] {
        let rel = if fine.contains("'static") {
            "src/core/origin.rs"
        } else {
            "src/core/x.rs"
        };
        assert!(check_channel_names(rel, fine).is_empty(), "{fine}");
    }
}
