//! Every problem of a configuration that does not deserialize, not just the first.
//!
//! serde stops at the first unknown field or wrong type, but the configuration promise is that
//! every problem is reported at once. So after each failure the offending entry is blanked out
//! of the text (spaces over its characters, line breaks kept, so every later line and column
//! stays where it was in the file) and the text is deserialized again, until it passes or the
//! problems stop changing. A YAML syntax error cannot be stepped over: it is reported alone, at
//! the line the parser stopped on, with the key written there, because the deserializer may
//! already have failed on a value above it that only looked wrong because of the broken line.

use super::index::{LineIndex, Pos, SyntaxError};
use super::{Config, Problem};

/// The most problems collected from one file; past this the file needs a fresh look anyway.
const MAX_PROBLEMS: usize = 50;

/// Deserializes `text`, or returns every problem that stops it, in file order. `index` is the
/// index of `text`.
pub(crate) fn deserialize(text: &str, index: &LineIndex) -> Result<Config, Vec<Problem>> {
    let first = match parse(text) {
        Ok(config) => return Ok(config),
        Err(error) => error,
    };
    if let Some(syntax) = index.syntax_error() {
        return Err(vec![syntax_problem(text, index, syntax)]);
    }
    let mut problems = vec![deserialize_problem(&first, index)];
    let mut error = first;
    let mut text = text.to_owned();
    let mut index = index.clone();
    while problems.len() < MAX_PROBLEMS {
        let Some(blanked) = error_entry(&error, &index).and_then(|at| blank(&text, &index, at))
        else {
            break;
        };
        let reindexed = LineIndex::build(&blanked);
        if reindexed.syntax_error().is_some() {
            // The edit broke the text (an odd layout); what was found so far stands.
            break;
        }
        text = blanked;
        index = reindexed;
        error = match parse(&text) {
            Ok(_) => break,
            Err(error) => error,
        };
        let problem = deserialize_problem(&error, &index);
        if problems.contains(&problem) {
            break;
        }
        problems.push(problem);
    }
    problems.sort_by_key(|problem| problem.line.unwrap_or(usize::MAX));
    Err(problems)
}

fn parse(text: &str) -> Result<Config, serde_saphyr::Error> {
    let options = serde_saphyr::options! { with_snippet: false };
    serde_saphyr::from_str_with_options(text, options)
}

/// Where the deserializer says it failed.
fn error_pos(error: &serde_saphyr::Error) -> Option<Pos> {
    error
        .location()
        .map(|location| Pos {
            line: usize::try_from(location.line()).unwrap_or(usize::MAX),
            col: usize::try_from(location.column()).unwrap_or(usize::MAX),
        })
        .filter(|pos| pos.line > 0)
}

/// Turns a deserializer error into a problem at the field it points to.
fn deserialize_problem(error: &serde_saphyr::Error, index: &LineIndex) -> Problem {
    let pos = error_pos(error);
    let field = pos
        .and_then(|pos| index.field_at(pos))
        .unwrap_or("(document)");
    Problem::new(
        pos.map(|pos| pos.line),
        field,
        clean_message(&error.to_string()),
    )
}

/// The `key: value` entry to blank for `error`: the one it points to, or for a list item the
/// entry holding the list (an item cannot be taken out of a block list by blanking it).
fn error_entry(error: &serde_saphyr::Error, index: &LineIndex) -> Option<usize> {
    let mut at = index.entry_at(error_pos(error)?)?;
    while let Some(entry) = index.get(at)
        && entry.is_item
    {
        at = entry.parent?;
    }
    Some(at)
}

/// `text` with entry `at` blanked out. An entry alone in a block mapping becomes `{}`, since an
/// empty block mapping would read as null; in a flow mapping its separating comma goes too.
fn blank(text: &str, index: &LineIndex, at: usize) -> Option<String> {
    let entry = index.get(at)?;
    let range = entry.bytes.clone();
    if range.is_empty()
        || range.end > text.len()
        || !text.is_char_boundary(range.start)
        || !text.is_char_boundary(range.end)
    {
        return None;
    }
    let alone = !index
        .entries()
        .iter()
        .enumerate()
        .any(|(other, e)| other != at && e.parent == entry.parent && !e.is_item);
    let mut before = text[..range.start].to_owned();
    let mut after = text[range.end..].to_owned();
    let mut middle = spaces(&text[range.clone()]);
    if entry.in_flow {
        strip_comma(&mut before, &mut after);
    } else if alone {
        middle.replace_range(..2.min(middle.len()), "{}");
    }
    Some(format!("{before}{middle}{after}"))
}

/// Spaces in place of every character of `text` but line breaks.
fn spaces(text: &str) -> String {
    text.chars()
        .map(|c| if c == '\n' || c == '\r' { c } else { ' ' })
        .collect()
}

/// Blanks the comma after a removed flow entry, or else the one before it.
fn strip_comma(before: &mut String, after: &mut String) {
    let next = after.char_indices().find(|(_, c)| !c.is_whitespace());
    if let Some((at, ',')) = next {
        after.replace_range(at..=at, " ");
        return;
    }
    let previous = before
        .char_indices()
        .rev()
        .find(|(_, c)| !c.is_whitespace());
    if let Some((at, ',')) = previous {
        before.replace_range(at..=at, " ");
    }
}

/// A syntax error as a problem: the line to fix, the key written on it, and what is wrong in
/// words about indentation, which is what such errors almost always are.
fn syntax_problem(text: &str, index: &LineIndex, error: &SyntaxError) -> Problem {
    let lines: Vec<&str> = text.lines().collect();
    let mut line = error.pos.line;
    if error.message.contains("tab") {
        // The scanner stops at the value before a tab-indented line; that line is the one.
        let tabbed = (line.saturating_sub(1)..lines.len())
            .find(|&at| lines[at].trim_start_matches(' ').starts_with('\t'));
        if let Some(at) = tabbed {
            line = at + 1;
        }
    }
    let written_key = line
        .checked_sub(1)
        .and_then(|at| lines.get(at))
        .and_then(|text| key_on(text))
        .map(str::to_owned);
    let (line, field) = match written_key {
        Some(key) => (line, key),
        // An unclosed bracket fails at the end of the file: name the last field read instead.
        None => match index.entry_at(error.pos).and_then(|at| index.get(at)) {
            Some(entry) => (entry.line(), entry.path.clone()),
            None => (line, "(document)".to_owned()),
        },
    };
    Problem::new(Some(line), field, explain(&error.message))
}

/// The key a line starts with (`  - name: x` → `name`), if it starts with one.
fn key_on(line: &str) -> Option<&str> {
    let line = line.trim_start().trim_start_matches("- ");
    let (key, _) = line.split_once(':')?;
    let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
    let plain = !key.is_empty() && !key.contains(char::is_whitespace) && !key.starts_with('#');
    plain.then_some(key)
}

/// The parser's words, said in terms of what to fix.
fn explain(message: &str) -> String {
    if message.contains("tab") {
        "indented with a tab; YAML indentation must be spaces".to_owned()
    } else if message.contains("mapping values are not allowed") {
        "a `key: value` cannot start here: is this line indented deeper than the field above \
         it? (A value containing `: ` needs quotes.)"
            .to_owned()
    } else if message.contains("did not find expected key") {
        "this line is not indented like the other fields of its section".to_owned()
    } else {
        format!("invalid YAML: {message}")
    }
}

/// Drops the location suffix (the problem carries the line) and phrases serde's messages for a
/// person editing the file.
fn clean_message(message: &str) -> String {
    let message = match message.rfind(" at line ") {
        Some(cut) if message[cut..].contains(", column ") => &message[..cut],
        _ => message,
    };
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((name, expected)) = rest.split_once("`, expected ")
    {
        let expected = expected
            .trim_start_matches("one of ")
            .trim_start_matches("field ")
            .replace('`', "");
        let closest = expected
            .split(", ")
            .map(|candidate| (edit_distance(name, candidate), candidate))
            .min()
            .filter(|(distance, _)| *distance <= 2.max(name.len() / 4));
        return match closest {
            Some((_, candidate)) => format!("unknown field, did you mean {candidate}?"),
            None => format!("unknown field (expected one of: {expected})"),
        };
    }
    let friendlier = [
        (
            "expected mapping start",
            "expected a mapping of fields (write {} for an empty section)",
        ),
        ("expected sequence start", "expected a list"),
        (
            "cannot deserialize null into string",
            "expected a string, found nothing (write \"\" for empty)",
        ),
        (
            "expected string scalar",
            "expected a single value, found a list or mapping",
        ),
        ("duplicate mapping key", "duplicate key"),
    ];
    for (serde_text, ours) in friendlier {
        if message.starts_with(serde_text) {
            return ours.to_owned();
        }
    }
    if let Some(kind) = message.strip_prefix("invalid ")
        && matches!(kind, "u16" | "u32" | "u64" | "usize" | "i64")
    {
        return format!("expected a whole number ({kind})");
    }
    message.to_owned()
}

/// Levenshtein distance of two short strings, to suggest the field a typo meant.
fn edit_distance(left: &str, right: &str) -> usize {
    let right: Vec<char> = right.chars().collect();
    let mut row: Vec<usize> = (0..=right.len()).collect();
    for (i, left_char) in left.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, right_char) in right.iter().enumerate() {
            let substitution = diagonal + usize::from(left_char != *right_char);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[right.len()]
}
