//! Turning fetched bytes into text: charset decoding and HTML → readable text.
//!
//! The charset comes from a byte-order mark, else the Content-Type `charset` parameter, else
//! (for HTML) a `<meta charset>` or `<meta http-equiv="Content-Type">` in the first 1024 bytes,
//! else UTF-8; undecodable bytes become U+FFFD. HTML is rendered by `html2text`, which drops
//! `<head>` (title included), `<script>` and `<style>`, and lists link targets as footnotes.

use encoding_rs::{Encoding, UTF_8};

/// The column width of rendered text; wide, so lines are rarely wrapped.
const TEXT_WIDTH: usize = 120;

/// How far into an HTML body a meta charset is looked for (as in the HTML standard's prescan).
const META_PRESCAN: usize = 1024;

/// Whether `content_type` is HTML.
pub fn is_html(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("text/html")
        || essence.eq_ignore_ascii_case("application/xhtml+xml")
}

/// Decodes `body` into text, choosing the encoding as the module doc says.
pub fn decode(body: &[u8], content_type: &str) -> String {
    let encoding = charset_param(content_type)
        .or_else(|| is_html(content_type).then(|| meta_charset(body)).flatten())
        .unwrap_or(UTF_8);
    // `decode` sniffs a BOM first and replaces malformed sequences.
    let (text, used, had_errors) = encoding.decode(body);
    if had_errors {
        tracing::debug!(
            encoding = used.name(),
            "Fetched body had malformed bytes; replaced."
        );
    }
    text.into_owned()
}

/// The encoding named by the `charset` parameter of a Content-Type value.
fn charset_param(content_type: &str) -> Option<&'static Encoding> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("charset") {
            return None;
        }
        Encoding::for_label(value.trim().trim_matches(['"', '\'']).as_bytes())
    })
}

/// The encoding named by a meta tag near the start of an HTML document.
fn meta_charset(body: &[u8]) -> Option<&'static Encoding> {
    let head = &body[..body.len().min(META_PRESCAN)];
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    let mut rest = head.as_str();
    while let Some(start) = rest.find("<meta") {
        let tag = &rest[start..];
        let end = tag.find('>').unwrap_or(tag.len());
        let tag_text = &tag[..end];
        if let Some(pos) = tag_text.find("charset=") {
            let value = tag_text[pos + "charset=".len()..].trim_start_matches(['"', '\'', ' ']);
            let label: String = value
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
                .collect();
            if let Some(encoding) = Encoding::for_label(label.as_bytes()) {
                // A meta tag can't honestly claim UTF-16: the bytes were read as ASCII.
                return Some(encoding.output_encoding());
            }
        }
        rest = &tag[end..];
    }
    None
}

/// Renders HTML as readable plain text.
pub fn html_to_text(html: &str) -> String {
    match html2text::config::plain().string_from_read(html.as_bytes(), TEXT_WIDTH) {
        Ok(text) => text.trim().to_owned(),
        Err(error) => {
            tracing::warn!(error = %error, "HTML rendering failed; returning the raw HTML.");
            html.to_owned()
        }
    }
}

/// Cuts `text` to `max_chars` characters; the flag says whether anything was cut.
pub fn cut_chars(text: String, max_chars: usize) -> (String, bool) {
    match text.char_indices().nth(max_chars) {
        Some((byte_idx, _)) => (text[..byte_idx].to_owned(), true),
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charset_sources() {
        // "café" in ISO-8859-1 is 63 61 66 E9.
        let latin1 = b"caf\xe9";
        assert_eq!(decode(latin1, "text/plain; charset=ISO-8859-1"), "café");
        assert_eq!(decode(latin1, "text/plain; charset=\"latin1\""), "café");
        assert_eq!(decode(latin1, "text/plain"), "caf\u{fffd}");
        let html = b"<html><head><meta charset=\"iso-8859-1\"></head><body>caf\xe9</body></html>";
        assert!(decode(html, "text/html").contains("café"));
        let http_equiv = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1252\">\x93q\x94";
        assert!(decode(http_equiv, "text/html").contains("\u{201c}q\u{201d}"));
        assert_eq!(
            decode("\u{feff}hé".as_bytes(), "text/plain; charset=latin1"),
            "hé"
        );
    }

    #[test]
    fn html_drops_head_script_and_style() {
        let html = "<html><head><title>T1</title><style>.x{color:red}</style></head>\
                    <body><h1>Hello</h1><script>alert(1)</script><p>World <b>bold</b></p></body></html>";
        let text = html_to_text(html);
        assert!(text.contains("Hello") && text.contains("World"), "{text}");
        for absent in ["T1", "color", "alert", "<p>", "<b>"] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
    }

    #[test]
    fn cut_respects_characters() {
        assert_eq!(cut_chars("héllo".to_owned(), 2), ("hé".to_owned(), true));
        assert_eq!(cut_chars("hé".to_owned(), 2), ("hé".to_owned(), false));
    }
}
