//! HEARTBEAT.md and the reply rule: when a heartbeat runs, and when its answer is silence.
//!
//! [`is_effectively_empty`] decides whether the checklist gives the agent anything to do. It is
//! empty when, once HTML comments are removed (single- or multi-line; an unclosed `<!--`
//! comments out the rest), every line is blank, a `#` heading, a bare `- [ ]` / `* [ ]`, or a
//! checked item `- [x]` / `* [X]` (with any text). A *missing* HEARTBEAT.md counts as empty too,
//! so the heartbeat skips: the original ran anyway, but the spec runs a heartbeat only when the
//! checklist asks for something, and an absent checklist asks for nothing.
//!
//! [`is_ok_reply`] decides whether a reply means "nothing to report" and is dropped. After
//! trimming, a reply is OK when it is [`OK_TOKEN`], or its first or last line is the token, or
//! the token is followed only by punctuation (`HEARTBEAT_OK.`, which the original delivered).
//! Markdown emphasis or code marks around the token (`**HEARTBEAT_OK**`) are ignored. Anything
//! else is an alert.

/// The reply that means "nothing needs attention".
pub const OK_TOKEN: &str = "HEARTBEAT_OK";

/// Whether HEARTBEAT.md's text asks for nothing (see the module doc for the rules).
pub fn is_effectively_empty(text: &str) -> bool {
    without_comments(text).lines().all(is_empty_line)
}

/// Removes every `<!-- ... -->` span, across lines; an unclosed comment runs to the end.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("<!--") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 4..];
        match after.find("-->") {
            Some(close) => {
                // Keep the line breaks so the lines around the comment stay separate.
                out.extend(after[..close].chars().filter(|&c| c == '\n'));
                rest = &after[close + 3..];
            }
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

fn is_empty_line(line: &str) -> bool {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return true;
    }
    let Some(item) = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")) else {
        return false;
    };
    let item = item.trim_start();
    item == "[ ]" || item.starts_with("[x]") || item.starts_with("[X]")
}

/// Whether a heartbeat reply means "nothing to report" (see the module doc for the rules).
pub fn is_ok_reply(text: &str) -> bool {
    let text = text.trim();
    if is_token_line(text) {
        return true;
    }
    let first = text.lines().next().unwrap_or_default();
    let last = text.lines().next_back().unwrap_or_default();
    is_token_line(first) || is_token_line(last)
}

/// A line that is the token, optionally wrapped in `*` or `` ` `` and followed by punctuation.
fn is_token_line(line: &str) -> bool {
    let line = line.trim().trim_start_matches(['*', '`']);
    line.strip_prefix(OK_TOKEN).is_some_and(|rest| {
        rest.chars()
            .all(|c| c.is_ascii_punctuation() || c.is_whitespace())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_empty(text: &str, expected: bool) {
        assert_eq!(is_effectively_empty(text), expected, "checklist {text:?}");
    }

    fn check_ok(text: &str, expected: bool) {
        assert_eq!(is_ok_reply(text), expected, "reply {text:?}");
    }

    #[test]
    fn empty_checklists() {
        let table = [
            "",
            "\n  \n\t\n",
            "# Heartbeat\n\n## Tasks\n",
            "<!-- add tasks below -->",
            "# Tasks\n- [ ]\n* [ ]\n",
            "- [x] water the plants\n* [X] call mum\n- [X]\n",
            "<!--\nKeep this list short.\nOne task per line.\n-->\n# Tasks\n",
            "# Tasks\n<!-- one --> <!-- two -->\n- [ ]",
            "<!-- an unclosed comment\n- check the mail",
        ];
        for text in table {
            check_empty(text, true);
        }
    }

    #[test]
    fn checklists_with_work() {
        let table = [
            "Check the server.",
            "# Tasks\n- [ ] check the server\n",
            "* [ ] reply to Bob",
            "- check the mail",
            "<!-- note --> check the backups",
            "<!--\nmulti\n-->\nremind me about the dentist",
            "- [x] done\n- [ ] not done",
            "[ ] bare box with text",
        ];
        for text in table {
            check_empty(text, false);
        }
    }

    #[test]
    fn ok_replies() {
        let table = [
            "HEARTBEAT_OK",
            "  HEARTBEAT_OK  \n",
            "HEARTBEAT_OK.",
            "HEARTBEAT_OK!",
            "HEARTBEAT_OK ...",
            "**HEARTBEAT_OK**",
            "`HEARTBEAT_OK`",
            "HEARTBEAT_OK\nNothing needs attention.",
            "I checked everything.\nHEARTBEAT_OK",
            "All quiet.\n\nHEARTBEAT_OK.",
        ];
        for text in table {
            check_ok(text, true);
        }
    }

    #[test]
    fn alerts() {
        let table = [
            "",
            "The backup failed last night.",
            "HEARTBEAT_OK except the disk is full",
            "Disk is full.\nHEARTBEAT_OK is not appropriate\nCheck it.",
            "Remember: HEARTBEAT_OK",
            "HEARTBEAT_OKAY",
            "Sorry, the model is unreachable right now.",
        ];
        for text in table {
            check_ok(text, false);
        }
    }
}
