//! A field-path → source-position index of a YAML document.
//!
//! serde gives us typed values but forgets where they came from, and serde-saphyr only reports a
//! location when deserialization itself fails. Validation errors must still name the line of the
//! offending field, so this module walks the event stream of the same parser serde-saphyr uses
//! (`granit_parser`, re-exported by serde-saphyr) and records, for every mapping key and sequence
//! item, its dotted path (`llm.pools.default[0]`), where its key and value start, and the bytes
//! the whole entry takes (so `diagnosis.rs` can blank one out and look for the next problem).
//! It also keeps the parser's own syntax error, which points at the line that broke the
//! structure, where the deserializer may already have failed on a value above it.

use std::ops::Range;

use serde_saphyr::granit_parser::{Event, Marker, Parser, StructureStyle};

/// A 1-based line and column in the source text (the convention of serde-saphyr's `Location`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pos {
    pub(crate) line: usize,
    pub(crate) col: usize,
}

/// One field of the document: its path, where its key and value start, and its bytes.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    /// The dotted path (`llm.pools.default[0]`).
    pub(crate) path: String,
    key: Pos,
    value: Pos,
    /// From the start of the key to the end of the value (for a block mapping or sequence
    /// value, the start of whatever follows it).
    pub(crate) bytes: Range<usize>,
    /// Whether the mapping or sequence holding it is written in flow style (`{a: 1}`, `[a]`).
    pub(crate) in_flow: bool,
    /// The index of the entry whose value holds this one (none at the top level).
    pub(crate) parent: Option<usize>,
    /// Whether it is a sequence item rather than a `key: value`.
    pub(crate) is_item: bool,
}

impl Entry {
    /// The line its key is on.
    pub(crate) fn line(&self) -> usize {
        self.key.line
    }
}

/// The parser's error: where the text stopped being YAML, and its words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) pos: Pos,
    pub(crate) message: String,
}

/// Paths of every field in a document with their positions, in document order, and the
/// syntax error that stopped the walk, if any.
#[derive(Clone, Debug, Default)]
pub(crate) struct LineIndex {
    entries: Vec<Entry>,
    syntax_error: Option<SyntaxError>,
}

/// What the walker is inside of while it consumes events.
enum Frame {
    /// A mapping at `path`; `key` is the pending key (its text, position and byte offset) once
    /// read; `entry` is the index of the entry whose value this mapping is.
    Map {
        path: String,
        key: Option<(String, Pos, usize)>,
        flow: bool,
        entry: Option<usize>,
    },
    /// A sequence at `path`; `next` is the index of the next item.
    Seq {
        path: String,
        next: usize,
        flow: bool,
        entry: Option<usize>,
    },
    /// A node whose contents are not indexed (a complex mapping key); counts nesting depth.
    Skip(usize),
}

/// The kind of node an event starts.
#[derive(Clone, Copy)]
enum Node<'a> {
    /// A scalar (aliases count as scalars) with its text.
    Scalar(&'a str),
    /// A mapping; `true` when written in flow style.
    Map(bool),
    /// A sequence; `true` when written in flow style.
    Seq(bool),
}

/// A marker's byte offset (always known for text input; the character index otherwise).
fn byte(marker: &Marker) -> usize {
    marker.byte_offset().unwrap_or_else(|| marker.index())
}

impl LineIndex {
    /// Indexes `text`. A syntax error stops the walk: what was read so far is kept, which is
    /// enough to name the field around the error, and the error itself is kept too.
    pub(crate) fn build(text: &str) -> Self {
        let mut index = Self::default();
        let mut stack: Vec<Frame> = Vec::new();
        for next in Parser::new_from_str(text) {
            let (event, span) = match next {
                Ok(next) => next,
                Err(error) => {
                    let marker = error.marker();
                    index.syntax_error = Some(SyntaxError {
                        pos: Pos {
                            line: marker.line(),
                            col: marker.col() + 1,
                        },
                        message: error.info(),
                    });
                    break;
                }
            };
            let pos = Pos {
                line: span.start.line(),
                col: span.start.col() + 1,
            };
            let bytes = byte(&span.start)..byte(&span.end);
            let flow = |style: StructureStyle| style == StructureStyle::Flow;
            match event {
                Event::Scalar(value, ..) => {
                    index.node(&mut stack, pos, bytes, Node::Scalar(&value))
                }
                Event::Alias(_) => index.node(&mut stack, pos, bytes, Node::Scalar("")),
                Event::MappingStart(style, ..) => {
                    index.node(&mut stack, pos, bytes, Node::Map(flow(style)));
                }
                Event::SequenceStart(style, ..) => {
                    index.node(&mut stack, pos, bytes, Node::Seq(flow(style)));
                }
                Event::MappingEnd | Event::SequenceEnd => match stack.last_mut() {
                    Some(Frame::Skip(depth)) if *depth > 1 => *depth -= 1,
                    _ => {
                        if let Some(Frame::Map { entry, .. } | Frame::Seq { entry, .. }) =
                            stack.pop()
                            && let Some(entry) = entry.and_then(|at| index.entries.get_mut(at))
                        {
                            entry.bytes.end = bytes.end;
                        }
                    }
                },
                _ => {}
            }
        }
        index
    }

    /// Handles one node event at `pos`, taking `bytes` of the text.
    fn node(&mut self, stack: &mut Vec<Frame>, pos: Pos, bytes: Range<usize>, node: Node<'_>) {
        let container = !matches!(node, Node::Scalar(_));
        let child_path = match stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Skip(depth)) => {
                if container {
                    *depth += 1;
                }
                None
            }
            Some(Frame::Map {
                key: pending @ None,
                ..
            }) => {
                // A mapping or sequence used as a key is not indexed: it gets a placeholder name.
                let name = match node {
                    Node::Scalar(text) => text,
                    _ => "?",
                };
                *pending = Some((name.to_owned(), pos, bytes.start));
                if container {
                    stack.push(Frame::Skip(1));
                }
                return;
            }
            Some(Frame::Map {
                path,
                key,
                flow,
                entry,
            }) => {
                let (name, key_pos, key_byte) = key.take().unwrap_or_default();
                let child = join_key(path, &name);
                self.entries.push(Entry {
                    path: child.clone(),
                    key: key_pos,
                    value: pos,
                    bytes: key_byte..bytes.end,
                    in_flow: *flow,
                    parent: *entry,
                    is_item: false,
                });
                Some(child)
            }
            Some(Frame::Seq {
                path,
                next,
                flow,
                entry,
            }) => {
                let child = format!("{path}[{next}]");
                *next += 1;
                self.entries.push(Entry {
                    path: child.clone(),
                    key: pos,
                    value: pos,
                    bytes,
                    in_flow: *flow,
                    parent: *entry,
                    is_item: true,
                });
                Some(child)
            }
        };
        // The entry whose value this container is (none for the document itself).
        let entry = if stack.is_empty() {
            None
        } else {
            self.entries.len().checked_sub(1)
        };
        match (node, child_path) {
            (Node::Map(flow), Some(path)) => stack.push(Frame::Map {
                path,
                key: None,
                flow,
                entry,
            }),
            (Node::Seq(flow), Some(path)) => stack.push(Frame::Seq {
                path,
                next: 0,
                flow,
                entry,
            }),
            _ => {}
        }
    }

    /// Where the text stopped being YAML, if it did.
    pub(crate) fn syntax_error(&self) -> Option<&SyntaxError> {
        self.syntax_error.as_ref()
    }

    /// Every indexed field, in document order.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
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
        let entry = self.entries.get(self.entry_at(at)?)?;
        Some(&entry.path)
    }

    /// The index (in [`Self::entries`]) of the entry behind [`Self::field_at`].
    pub(crate) fn entry_at(&self, at: Pos) -> Option<usize> {
        let entries = &self.entries;
        let exact = entries.iter().position(|entry| entry.key == at);
        let exact = exact.or_else(|| entries.iter().rposition(|entry| entry.value == at));
        exact.or_else(|| entries.iter().rposition(|entry| entry.key <= at))
    }

    /// The entry at `at` in [`Self::entries`].
    pub(crate) fn get(&self, at: usize) -> Option<&Entry> {
        self.entries.get(at)
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
