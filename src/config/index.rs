//! A field-path → source-position index of a YAML document.
//!
//! serde gives us typed values but forgets where they came from, and serde-saphyr only reports a
//! location when deserialization itself fails. Validation errors must still name the line of the
//! offending field, so this module walks the event stream of the same parser serde-saphyr uses
//! (`granit_parser`, re-exported by serde-saphyr) and records, for every mapping key and sequence
//! item, its dotted path (`llm.pools.default[0]`) and where its key and value start.

use serde_saphyr::granit_parser::{Event, Parser};

/// A 1-based line and column in the source text (the convention of serde-saphyr's `Location`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pos {
    pub(crate) line: usize,
    pub(crate) col: usize,
}

/// One field of the document: its path, where its key starts and where its value starts.
#[derive(Clone, Debug)]
struct Entry {
    path: String,
    key: Pos,
    value: Pos,
}

/// Paths of every field in a document with their positions, in document order.
#[derive(Clone, Debug, Default)]
pub(crate) struct LineIndex {
    entries: Vec<Entry>,
}

/// What the walker is inside of while it consumes events.
enum Frame {
    /// A mapping at `path`; `key` is the pending key (and its position) once read.
    Map {
        path: String,
        key: Option<(String, Pos)>,
    },
    /// A sequence at `path`; `next` is the index of the next item.
    Seq { path: String, next: usize },
    /// A node whose contents are not indexed (a complex mapping key); counts nesting depth.
    Skip(usize),
}

impl LineIndex {
    /// Indexes `text`. A syntax error stops the walk: what was read so far is kept, which is
    /// enough to name the field around the error.
    pub(crate) fn build(text: &str) -> Self {
        let mut index = Self::default();
        let mut stack: Vec<Frame> = Vec::new();
        for next in Parser::new_from_str(text) {
            let Ok((event, span)) = next else { break };
            let pos = Pos {
                line: span.start.line(),
                col: span.start.col() + 1,
            };
            match event {
                Event::Scalar(value, ..) => index.node(&mut stack, pos, Some(&value), None),
                Event::Alias(_) => index.node(&mut stack, pos, Some(""), None),
                Event::MappingStart(..) => index.node(&mut stack, pos, None, Some(true)),
                Event::SequenceStart(..) => index.node(&mut stack, pos, None, Some(false)),
                Event::MappingEnd | Event::SequenceEnd => match stack.last_mut() {
                    Some(Frame::Skip(depth)) if *depth > 1 => *depth -= 1,
                    _ => {
                        stack.pop();
                    }
                },
                _ => {}
            }
        }
        index
    }

    /// Handles one node event. `scalar` is the text of a scalar (aliases count as scalars);
    /// `container` is `Some(true)` for a mapping start and `Some(false)` for a sequence start.
    fn node(
        &mut self,
        stack: &mut Vec<Frame>,
        pos: Pos,
        scalar: Option<&str>,
        container: Option<bool>,
    ) {
        let child_path = match stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Skip(depth)) => {
                if container.is_some() {
                    *depth += 1;
                }
                None
            }
            Some(Frame::Map {
                key: pending @ None,
                ..
            }) => {
                // A mapping or sequence used as a key is not indexed: it gets a placeholder name.
                *pending = Some((scalar.unwrap_or("?").to_owned(), pos));
                if container.is_some() {
                    stack.push(Frame::Skip(1));
                }
                return;
            }
            Some(Frame::Map { path, key }) => {
                let (name, key_pos) = key.take().unwrap_or_default();
                let child = join_key(path, &name);
                self.entries.push(Entry {
                    path: child.clone(),
                    key: key_pos,
                    value: pos,
                });
                Some(child)
            }
            Some(Frame::Seq { path, next }) => {
                let child = format!("{path}[{next}]");
                *next += 1;
                self.entries.push(Entry {
                    path: child.clone(),
                    key: pos,
                    value: pos,
                });
                Some(child)
            }
        };
        match (container, child_path) {
            (Some(true), Some(path)) => stack.push(Frame::Map { path, key: None }),
            (Some(false), Some(path)) => stack.push(Frame::Seq { path, next: 0 }),
            _ => {}
        }
    }

    /// The line of `path`, or of its nearest ancestor that appears in the document.
    pub(crate) fn line_of(&self, path: &str) -> Option<usize> {
        let mut current = path;
        loop {
            if let Some(entry) = self.entries.iter().find(|entry| entry.path == current) {
                return Some(entry.key.line);
            }
            current = parent(current)?;
        }
    }

    /// The field at a position reported by the deserializer: the key or value starting exactly
    /// there, else the last field starting before it.
    pub(crate) fn field_at(&self, at: Pos) -> Option<&str> {
        let exact = self.entries.iter().find(|entry| entry.key == at);
        let exact = exact.or_else(|| self.entries.iter().rev().find(|entry| entry.value == at));
        let entry = exact.or_else(|| self.entries.iter().rev().find(|entry| entry.key <= at))?;
        Some(&entry.path)
    }
}

/// `parent.key`, or `key` at the root.
fn join_key(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// The parent of a dotted/indexed path (`a.b[2]` → `a.b`, `a.b` → `a`, `a` → none).
fn parent(path: &str) -> Option<&str> {
    if path.ends_with(']') {
        return path.rfind('[').map(|cut| &path[..cut]);
    }
    path.rfind('.').map(|cut| &path[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(yaml: &str, path: &str, line: Option<usize>) {
        assert_eq!(
            LineIndex::build(yaml).line_of(path),
            line,
            "{path} in\n{yaml}"
        );
    }

    #[test]
    fn paths_and_lines() {
        let yaml = "llm:\n  pools:\n    default:\n      - a\n      - {model: b}\n  models:\n    a: {provider: p}\nagents:\n  keep_recent: 3\n";
        check(yaml, "llm", Some(1));
        check(yaml, "llm.pools.default[0]", Some(4));
        check(yaml, "llm.pools.default[1]", Some(5));
        check(yaml, "llm.pools.default[1].model", Some(5));
        check(yaml, "llm.models.a.provider", Some(7));
        check(yaml, "agents.keep_recent", Some(9));
        check(yaml, "agents.heartbeat.timezone", Some(8));
        check(yaml, "gateway.http", None);
    }

    #[test]
    fn json_lines() {
        let json = "{\n  \"llm\": {\n    \"default_pool\": \"x\"\n  }\n}\n";
        check(json, "llm.default_pool", Some(3));
    }

    #[test]
    fn field_at_positions() {
        let index = LineIndex::build("agents:\n  keep_recent: abc\n");
        assert_eq!(
            index.field_at(Pos { line: 2, col: 3 }),
            Some("agents.keep_recent")
        );
        assert_eq!(
            index.field_at(Pos { line: 2, col: 16 }),
            Some("agents.keep_recent")
        );
    }

    #[test]
    fn complex_keys_are_skipped() {
        check("? [a, b]\n: 1\nc: 2\n", "c", Some(3));
    }
}
