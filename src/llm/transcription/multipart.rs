//! A `multipart/form-data` body (RFC 7578), the little of it a transcription request needs:
//! text fields and one file. The boundary is one the parts do not contain.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Makes boundaries differ between requests without a random source.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A form being written.
pub(crate) struct Form<'a> {
    parts: Vec<Part<'a>>,
}

enum Part<'a> {
    Text(&'a str, &'a str),
    File {
        name: &'a str,
        file_name: &'a str,
        mime: &'a str,
        bytes: &'a [u8],
    },
}

impl<'a> Form<'a> {
    /// An empty form.
    pub(crate) fn new() -> Self {
        Self { parts: Vec::new() }
    }

    /// Adds the text field `name`.
    pub(crate) fn text(mut self, name: &'a str, value: &'a str) -> Self {
        self.parts.push(Part::Text(name, value));
        self
    }

    /// Adds the file field `name` (`application/octet-stream` when no type is known).
    pub(crate) fn file(
        mut self,
        name: &'a str,
        file_name: &'a str,
        mime: Option<&'a str>,
        bytes: &'a [u8],
    ) -> Self {
        self.parts.push(Part::File {
            name,
            file_name,
            mime: mime.unwrap_or("application/octet-stream"),
            bytes,
        });
        self
    }

    /// The boundary: not found in any part (a clash is astronomically unlikely, but cheap to
    /// rule out).
    fn boundary(&self) -> String {
        loop {
            let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos());
            let boundary = format!("squidbot-{nanos:x}-{sequence:x}");
            let clash = self.parts.iter().any(|part| {
                let bytes = match part {
                    Part::Text(_, value) => value.as_bytes(),
                    Part::File { bytes, .. } => bytes,
                };
                bytes
                    .windows(boundary.len())
                    .any(|window| window == boundary.as_bytes())
            });
            if !clash {
                return boundary;
            }
        }
    }

    /// The `Content-Type` header and the body.
    pub(crate) fn finish(self) -> (String, Vec<u8>) {
        let boundary = self.boundary();
        let mut body = Vec::new();
        for part in &self.parts {
            let mut head = format!("--{boundary}\r\n");
            match part {
                Part::Text(name, _) => {
                    let _ = write!(
                        head,
                        "Content-Disposition: form-data; name=\"{}\"\r\n\r\n",
                        quoted(name)
                    );
                }
                Part::File {
                    name,
                    file_name,
                    mime,
                    ..
                } => {
                    let _ = write!(
                        head,
                        "Content-Disposition: form-data; name=\"{}\"; filename=\"{}\"\r\n\
                         Content-Type: {}\r\n\r\n",
                        quoted(name),
                        quoted(file_name),
                        quoted(mime)
                    );
                }
            }
            body.extend_from_slice(head.as_bytes());
            match part {
                Part::Text(_, value) => body.extend_from_slice(value.as_bytes()),
                Part::File { bytes, .. } => body.extend_from_slice(bytes),
            }
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        (format!("multipart/form-data; boundary={boundary}"), body)
    }
}

/// `value` safe inside a quoted header parameter: quotes and line breaks are replaced, as
/// browsers do (RFC 7578 §4.2 leaves the escaping to the sender).
fn quoted(value: &str) -> String {
    value
        .replace('"', "%22")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_has_its_fields_and_file_between_boundaries() {
        let (content_type, body) = Form::new()
            .text("model", "whisper-1")
            .file("file", "note \"1\".ogg", Some("audio/ogg"), b"OggS\x00\x01")
            .finish();
        let boundary = content_type
            .strip_prefix("multipart/form-data; boundary=")
            .unwrap_or_default()
            .to_owned();
        assert!(!boundary.is_empty(), "{content_type}");
        let mut expected = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"note %221%22.ogg\"\r\nContent-Type: audio/ogg\r\n\r\n"
        )
        .into_bytes();
        expected.extend_from_slice(b"OggS\x00\x01\r\n");
        expected.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        assert_eq!(body, expected);
    }
}
