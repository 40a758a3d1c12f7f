//! The text `search_history` returns: numbered entries that no message can forge.
//!
//! ```text
//! 2 results for "where does Anna work", best first (times UTC):
//!
//! [1] 2026-05-03 14:02 · session matrix:!abc:example.org · user
//!   before, assistant: "How was the first week?"
//!   match, user: "Anna started at the observatory on Monday …"
//!   after, assistant: "That sounds exciting!"
//!
//! [2] summary of session email:anna@example.org, written 2026-04-01 09:00
//!   match: "… Anna works for a shipping company in Hamburg …"
//! ```
//!
//! Every message text is a JSON string (newlines, quotes and control characters escaped), so an
//! entry header can only come from here: a message holding `\n[2] …` or `## Match` stays inside
//! its quotes on its own line. A long text is cut to an excerpt centred on the stretch with the
//! most query terms, and the whole output is capped at [`MAX_OUTPUT_CHARS`] at an entry boundary.

use std::fmt::Write as _;

use crate::core::message::Role;
use crate::storage::history_index::{Hit, IndexedMessage, analyze};

/// The matching message (or summary) is cut to about this many characters around its match.
pub const MATCH_CHARS: usize = 700;
/// Each context message is cut to about this many characters.
pub const CONTEXT_CHARS: usize = 200;
/// The whole output stays under this many characters (the agent caps a tool result at 16 KiB).
pub const MAX_OUTPUT_CHARS: usize = 12_000;

/// The tool's text for `hits` of `query`.
pub fn format_hits(query: &str, hits: &[Hit]) -> String {
    let quoted = quote(query);
    if hits.is_empty() {
        return format!(
            "No results for {quoted}. Try other words (a name, a place, a thing), or a wider date range."
        );
    }
    let terms = analyze::query_terms(query);
    let plural = if hits.len() == 1 { "" } else { "s" };
    let mut out = format!(
        "{} result{plural} for {quoted}, best first (times UTC):\n",
        hits.len()
    );
    let mut chars = out.chars().count();
    for (i, hit) in hits.iter().enumerate() {
        let entry = entry(i + 1, hit, &terms);
        chars += entry.chars().count();
        if chars > MAX_OUTPUT_CHARS {
            let _ = writeln!(
                out,
                "\n({} more results not shown: the output is capped; ask for fewer or narrow the query.)",
                hits.len() - i
            );
            break;
        }
        out.push_str(&entry);
    }
    out
}

/// One numbered entry.
fn entry(number: usize, hit: &Hit, terms: &[String]) -> String {
    let when = hit.message.timestamp.format("%Y-%m-%d %H:%M");
    let mut out = String::new();
    if hit.summary {
        let _ = writeln!(
            out,
            "\n[{number}] summary of session {}, written {when}",
            hit.session
        );
        let text = excerpt(&hit.message.content, terms, MATCH_CHARS, Side::Centre);
        let _ = writeln!(out, "  match: {}", quote(&text));
        return out;
    }
    let _ = writeln!(
        out,
        "\n[{number}] {when} · session {} · {}",
        hit.session,
        role(&hit.message)
    );
    if let Some(before) = &hit.before {
        context_line(&mut out, "before", before, terms, Side::End);
    }
    let text = excerpt(&hit.message.content, terms, MATCH_CHARS, Side::Centre);
    let _ = writeln!(out, "  match, {}: {}", role(&hit.message), quote(&text));
    if let Some(after) = &hit.after {
        context_line(&mut out, "after", after, terms, Side::Start);
    }
    out
}

fn context_line(
    out: &mut String,
    label: &str,
    message: &IndexedMessage,
    terms: &[String],
    side: Side,
) {
    let text = excerpt(&message.content, terms, CONTEXT_CHARS, side);
    let _ = writeln!(out, "  {label}, {}: {}", role(message), quote(&text));
}

fn role(message: &IndexedMessage) -> &'static str {
    match message.role {
        Role::User => "user",
        _ => "assistant",
    }
}

/// `text` as a JSON string: one line, nothing in it can end the quote.
fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| String::from("\"\""))
}

/// Which part of a text without query terms to keep.
#[derive(Clone, Copy)]
enum Side {
    /// The beginning (the message after a hit).
    Start,
    /// The end (the message before a hit).
    End,
    /// The beginning too, but a text with query terms is centred on them.
    Centre,
}

/// At most about `limit` characters of `text` (trimmed): all of it when short enough, else the
/// window holding the most query terms, marked with `…` where it was cut.
fn excerpt(text: &str, terms: &[String], limit: usize, side: Side) -> String {
    let text = text.trim();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    if chars.len() <= limit {
        return text.to_owned();
    }
    // Character index of each query term's start.
    let hits: Vec<usize> = analyze::terms(text)
        .iter()
        .filter(|term| terms.contains(&term.text))
        .map(|term| chars.partition_point(|(byte, _)| *byte < term.start))
        .collect();
    let start = if hits.is_empty() {
        match side {
            Side::End => chars.len() - limit,
            Side::Start | Side::Centre => 0,
        }
    } else {
        // Each window starts a third of the limit before a hit; keep the one with most hits.
        let lead = limit / 3;
        let mut best = (0, 0);
        for &hit in &hits {
            let start = hit.saturating_sub(lead).min(chars.len() - limit);
            let count = hits
                .iter()
                .filter(|&&h| h >= start && h < start + limit)
                .count();
            if count > best.1 {
                best = (start, count);
            }
        }
        best.0
    };
    let end = start + limit;
    let byte = |i: usize| chars.get(i).map_or(text.len(), |(b, _)| *b);
    let mut piece = &text[byte(start)..byte(end)];
    // Do not show half a word at a cut.
    if start > 0
        && let Some(space) = piece.find(char::is_whitespace).filter(|&s| s < 24)
    {
        piece = &piece[space..];
    }
    if end < chars.len()
        && let Some(space) = piece
            .rfind(char::is_whitespace)
            .filter(|&s| piece.len() - s < 24)
    {
        piece = &piece[..space];
    }
    let mut out = String::with_capacity(piece.len() + 8);
    if start > 0 {
        out.push('…');
    }
    out.push_str(piece.trim());
    if end < chars.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_text_is_kept_whole() {
        assert_eq!(
            excerpt("  hello there ", &[], 20, Side::Centre),
            "hello there"
        );
    }

    #[test]
    fn a_long_text_is_centred_on_the_terms() {
        let text = format!(
            "{} the violin recital was lovely {}",
            "a ".repeat(400),
            "b ".repeat(400)
        );
        let terms = analyze::query_terms("violin recital");
        let cut = excerpt(&text, &terms, 100, Side::Centre);
        assert!(cut.contains("violin recital"), "{cut}");
        assert!(cut.starts_with('…') && cut.ends_with('…'), "{cut}");
        assert!(cut.chars().count() <= 102, "{}", cut.chars().count());
    }

    #[test]
    fn context_without_terms_keeps_the_side_next_to_the_hit() {
        let text = format!("start {} end", "x ".repeat(300));
        assert!(excerpt(&text, &[], 50, Side::End).ends_with("end"));
        assert!(excerpt(&text, &[], 50, Side::Start).starts_with("start"));
    }
}
