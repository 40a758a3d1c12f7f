//! [`Chain`]: an error with its sources on one line, each said once.
//!
//! squidbot's errors print their cause and do not also return it as a `source` (see
//! ARCHITECTURE.md, "Errors"): their text is what a log line, a tool result or the person
//! reads, and a chain walked on top of it said each cause twice. A foreign cause, though, often
//! keeps the part a person can act on in its own sources (reqwest's "error sending request"
//! hides "Connection refused" two levels down); such a cause is printed through `Chain`, so
//! nothing it knows is lost when it stops being a source.
//!
//! It lives in core, though adapters use it most, because core's own errors that keep a cause
//! whole ([`crate::core::ports::channel::Cause`]) print it through `Chain` too, and core imports
//! nothing outside itself; it imports only `std`.

use std::error::Error;
use std::fmt;

/// Displays an error followed by each of its sources, `: `-separated, leaving out a source
/// whose words the text already holds (many errors repeat their source in their message).
#[derive(Clone, Copy)]
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = self.0.to_string();
        let mut source = self.0.source();
        while let Some(cause) = source {
            let words = cause.to_string();
            if !text.contains(&words) {
                text.push_str(": ");
                text.push_str(&words);
            }
            source = cause.source();
        }
        f.write_str(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with an optional source.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1
                .as_deref()
                .map(|layer| layer as &(dyn Error + 'static))
        }
    }

    #[test]
    fn every_source_is_said_once() {
        let refused = Layer("Connection refused (os error 111)", None);
        let connect = Layer("tcp connect error", Some(Box::new(refused)));
        let top = Layer("error sending request", Some(Box::new(connect)));
        assert_eq!(
            Chain(&top).to_string(),
            "error sending request: tcp connect error: Connection refused (os error 111)"
        );
        let inner = Layer("Not a directory (os error 20)", None);
        let repeating = Layer(
            "reading x: Not a directory (os error 20)",
            Some(Box::new(inner)),
        );
        assert_eq!(
            Chain(&repeating).to_string(),
            "reading x: Not a directory (os error 20)"
        );
        assert_eq!(Chain(&Layer("alone", None)).to_string(), "alone");
    }
}
