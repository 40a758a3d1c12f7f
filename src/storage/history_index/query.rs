//! Turning a user's query into a safe FTS5 expression, and running it newest first.
//!
//! The query is never passed to FTS5 as syntax: it is cut into terms (a `"quoted phrase"` or a
//! bare word), each term is reduced to its letters and digits, the same way the `unicode61`
//! tokenizer reads the text, and written back as a double-quoted FTS5 string. Bare words match
//! as prefixes (`deploy` finds `deployment`, closer to the original's substring search); all
//! terms must match (AND). So `"`, `*`, `:`, `-`, `AND`, `NEAR(` are plain text here.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{Hit, IndexedMessage};
use crate::core::message::Role;

/// The FTS5 expression for `query`, or `None` when it has no letters or digits to search for.
pub fn fts_query(query: &str) -> Option<String> {
    let mut terms = Vec::new();
    for (i, part) in query.split('"').enumerate() {
        // Odd parts were between quotes (an unclosed quote runs to the end).
        if i % 2 == 1 {
            if let Some(phrase) = phrase(part) {
                terms.push(phrase);
            }
        } else {
            for word in part.split_whitespace() {
                if let Some(phrase) = phrase(word) {
                    terms.push(format!("{phrase}*"));
                }
            }
        }
    }
    (!terms.is_empty()).then(|| terms.join(" AND "))
}

/// The tokens of `text` as one quoted FTS5 phrase (tokens contain no quote character).
fn phrase(text: &str) -> Option<String> {
    let tokens: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|token| !token.is_empty())
        .collect();
    (!tokens.is_empty()).then(|| format!("\"{}\"", tokens.join(" ")))
}

/// Runs the FTS expression `fts`: at most `max` hits at or after `since` (Unix milliseconds),
/// newest first (timestamp, then position in the session), each with its ±1 context.
pub(super) fn search(
    conn: &Connection,
    fts: &str,
    since: i64,
    max: usize,
) -> Result<Vec<Hit>, rusqlite::Error> {
    let mut statement = conn.prepare_cached(
        "SELECT f.session, m.file_id, m.pos, m.role, m.ts, m.content
         FROM messages_fts
         JOIN messages m ON m.id = messages_fts.rowid
         JOIN files f ON f.id = m.file_id
         WHERE messages_fts MATCH ?1 AND m.ts >= ?2
         ORDER BY m.ts DESC, m.pos DESC, m.id DESC
         LIMIT ?3",
    )?;
    let rows = statement.query_map(
        params![fts, since, i64::try_from(max).unwrap_or(i64::MAX)],
        |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
                message(row, 3)?,
            ))
        },
    )?;
    let mut found = Vec::new();
    for row in rows {
        found.push(row?);
    }
    let mut context = conn
        .prepare_cached("SELECT role, ts, content FROM messages WHERE file_id = ?1 AND pos = ?2")?;
    let mut neighbour = |file_id: i64, pos: i64| {
        context
            .query_row(params![file_id, pos], |row| message(row, 0))
            .optional()
    };
    let mut hits = Vec::with_capacity(found.len());
    for (session, file_id, pos, message) in found {
        let before = if pos > 0 {
            neighbour(file_id, pos - 1)?
        } else {
            None
        };
        let after = neighbour(file_id, pos + 1)?;
        hits.push(Hit {
            session,
            message,
            before,
            after,
        });
    }
    Ok(hits)
}

/// Reads `role, ts, content` starting at column `first`.
fn message(row: &Row<'_>, first: usize) -> Result<IndexedMessage, rusqlite::Error> {
    let role = if row.get::<_, i64>(first)? == ROLE_USER {
        Role::User
    } else {
        Role::Assistant
    };
    let millis: i64 = row.get(first + 1)?;
    Ok(IndexedMessage {
        role,
        timestamp: DateTime::<Utc>::from_timestamp_millis(millis).unwrap_or_default(),
        content: row.get(first + 2)?,
    })
}

/// The stored code of [`Role::User`].
pub(super) const ROLE_USER: i64 = 0;
/// The stored code of [`Role::Assistant`].
pub(super) const ROLE_ASSISTANT: i64 = 1;
