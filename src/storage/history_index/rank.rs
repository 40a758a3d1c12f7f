//! Ranking: which indexed messages answer a query best.
//!
//! 1. **Candidates.** The query's terms ([`analyze::query_terms`]) are ORed in one FTS5 query,
//!    filtered by the search's scope and cut to the [`CANDIDATES`] best by FTS5's bm25. A term
//!    in more than [`COMMON_TERM_DOCS`] messages is left out of that query when a rarer term is
//!    there to find candidates with: it would cost a scan of its whole posting list and adds
//!    almost nothing to any score, and the candidates' scores below still count it. When every
//!    term is that common, the candidates are the newest [`CANDIDATES`] matches instead (FTS5
//!    walks its posting lists newest first and stops): ranking a third of a million messages by
//!    a word that says little costs half a second and finds nothing better.
//! 2. **Okapi BM25** of each candidate, computed here over its re-analyzed text with
//!    `k1 = 1.2, b = 0.5` (messages are short; full length normalization over-rewards one-line
//!    replies) and the index-wide document frequencies.
//! 3. **Neighbours.** A message answering a question often does not repeat its words ("which
//!    team did you sign with?" — "The Minnesota Wolves!"): each message gains
//!    [`NEIGHBOUR_WEIGHT`] of the scores of the messages just before and after it, and a reply
//!    to a message that asks something (has a `?`) gains [`REPLY_WEIGHT`] of that message's
//!    score; those neighbours of the best candidates become candidates themselves.
//! 4. **Conversation.** A message inside a stretch of conversation about the query's subject is
//!    likelier to be the one meant: each gains up to [`WINDOW_WEIGHT`] of the best score, in
//!    proportion to how many of the query's terms (weighted by IDF, saturating) the messages
//!    within [`WINDOW`] positions of it contain.
//! 5. **Dates.** A date written in the query ("on 3 June, 2023", "in July 2023") is taken out
//!    of its words ([`dates`]) and raises the messages written within a day of it by
//!    [`DATE_WEIGHT`] of the best score.
//! 6. **Recency** is a mild prior: scores are raised by up to [`RECENCY_WEIGHT`] from the
//!    oldest candidate to the newest, and ties go to the newer message, so of two messages that
//!    answer equally well ("I live in Paris", later "I live in Berlin now") the newer comes first.
//!
//! Every weight here was chosen once, on the LoCoMo development conversations, as a round value
//! of a general mechanism; none is fitted to particular questions (see BENCHMARKS.md, Recall).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{Hit, IndexedMessage, ROLE_ASSISTANT, ROLE_SUMMARY, ROLE_USER};
use super::{analyze, dates};
use crate::core::message::Role;

/// The most candidates taken from FTS5 for re-scoring.
const CANDIDATES: i64 = 1_000;
/// A term in more messages than this is not used to find candidates when a rarer one is.
/// (Small in unit tests, so both ways of finding candidates are tested on small histories.)
const COMMON_TERM_DOCS: i64 = if cfg!(test) { 50 } else { 20_000 };
/// The most query terms used (a pasted page is not a question).
const MAX_TERMS: usize = 64;
/// BM25 term-frequency saturation.
const K1: f64 = 1.2;
/// BM25 length normalization.
const B: f64 = 0.5;
/// Share of each neighbour's score a message gains.
const NEIGHBOUR_WEIGHT: f64 = 0.3;
/// Messages on each side that make up a message's stretch of conversation.
const WINDOW: i64 = 5;
/// The conversation prior's weight, relative to the best BM25 score.
const WINDOW_WEIGHT: f64 = 0.4;
/// Share of a question's score its reply gains.
const REPLY_WEIGHT: f64 = 1.0;
/// What a message written on a date the query names gains, relative to the best BM25 score.
const DATE_WEIGHT: f64 = 0.5;
/// Slack around a named date, for the owner's time zone (ms): 14 hours on each side.
const DATE_SLACK_MS: i64 = 14 * 3_600_000;
/// The most a score is raised for being the newest candidate.
const RECENCY_WEIGHT: f64 = 0.2;

/// Where a search looks, as index row values.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scope {
    /// Messages at or after this time (Unix milliseconds).
    pub since: i64,
    /// Messages before this time (Unix milliseconds).
    pub until: i64,
    /// Only this file (`-1`: every file).
    pub only_file: i64,
    /// The asking session's file (`-1`: none), whose tail and summary are not hits.
    pub asking_file: i64,
    /// Where the asking session's tail starts (byte offset of its first message).
    pub tail_offset: i64,
}

/// A message or summary being scored.
struct Scored {
    id: i64,
    file_id: i64,
    pos: i64,
    role: i64,
    ts: i64,
    content: Option<String>,
    bm25: f64,
    /// Bit `i` is set when the message contains query term `i`.
    mask: u64,
    /// Whether the message asks something (so the next one is likely its answer).
    asks: bool,
    score: f64,
}

/// The index-wide statistics BM25 needs.
struct Stats {
    avg_len: f64,
    idf: Vec<f64>,
}

/// The best `max` hits for `query` within `scope`, best first.
pub(super) fn search(
    conn: &Connection,
    query: &str,
    scope: Scope,
    max: usize,
) -> Result<Vec<Hit>, rusqlite::Error> {
    let (named, rest) = dates::extract(query);
    let mut terms = analyze::query_terms(&rest);
    if terms.is_empty() {
        terms = analyze::query_terms(query);
    }
    terms.truncate(MAX_TERMS);
    let windows: Vec<(i64, i64)> = named
        .iter()
        .filter_map(|(first, last)| {
            let start = first.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis();
            let end = last
                .succ_opt()?
                .and_hms_opt(0, 0, 0)?
                .and_utc()
                .timestamp_millis();
            Some((start - DATE_SLACK_MS, end + DATE_SLACK_MS))
        })
        .collect();
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    let (stats, dfs) = stats(conn, &terms)?;
    let Some((any, common)) = candidate_query(&terms, &dfs) else {
        return Ok(Vec::new());
    };
    let phrases = phrases(query);
    let fts = if phrases.is_empty() {
        any
    } else {
        format!("({any}) AND {}", phrases.join(" AND "))
    };
    let mut scored = candidates(conn, &fts, scope, common)?;
    for item in &mut scored {
        let content = item.content.as_deref().unwrap_or_default();
        (item.bm25, item.mask) = bm25(content, &terms, &stats);
        item.asks = content.contains(['?', '？']);
    }
    if phrases.is_empty() {
        // A phrase must appear in every hit, so only a query without one widens to neighbours.
        add_neighbours(conn, &mut scored, scope, max)?;
    }
    combine(&mut scored, &stats, &windows);
    scored.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.ts.cmp(&a.ts))
            .then(b.pos.cmp(&a.pos))
    });
    scored.truncate(max);
    hits(conn, scored)
}

/// Document count, average length, and each term's IDF and document frequency.
fn stats(conn: &Connection, terms: &[String]) -> Result<(Stats, Vec<i64>), rusqlite::Error> {
    let mut meta = conn.prepare_cached("SELECT value FROM meta WHERE key = ?1")?;
    let mut get = |key: &str| -> Result<i64, rusqlite::Error> {
        Ok(meta
            .query_row(params![key], |row| row.get::<_, i64>(0))
            .optional()?
            .unwrap_or(0))
    };
    let docs = get("docs")?.max(1) as f64;
    let tokens = get("tokens")?.max(1) as f64;
    let mut vocab = conn.prepare_cached("SELECT doc FROM messages_vocab WHERE term = ?1")?;
    let mut dfs = Vec::with_capacity(terms.len());
    let mut idf = Vec::with_capacity(terms.len());
    for term in terms {
        let df: i64 = vocab
            .query_row(params![term], |row| row.get(0))
            .optional()?
            .unwrap_or(0);
        let df_f = df as f64;
        idf.push((1.0 + (docs - df_f + 0.5) / (df_f + 0.5)).ln().max(0.0));
        dfs.push(df);
    }
    Ok((
        Stats {
            avg_len: (tokens / docs).max(1.0),
            idf,
        },
        dfs,
    ))
}

/// The FTS5 expression finding candidates: the present terms ORed, less the very common ones
/// when a rarer one is present; and whether every term in it is very common. `None` when no
/// term occurs at all.
fn candidate_query(terms: &[String], dfs: &[i64]) -> Option<(String, bool)> {
    let present: Vec<(&String, i64)> = terms
        .iter()
        .zip(dfs)
        .filter(|(_, df)| **df > 0)
        .map(|(term, df)| (term, *df))
        .collect();
    let has_rare = present.iter().any(|(_, df)| *df <= COMMON_TERM_DOCS);
    let chosen: Vec<String> = present
        .iter()
        .filter(|(_, df)| !has_rare || *df <= COMMON_TERM_DOCS)
        // Terms are letters and digits only, so quoting makes each a plain FTS5 string.
        .map(|(term, _)| format!("\"{term}\""))
        .collect();
    (!chosen.is_empty()).then(|| (chosen.join(" OR "), !has_rare))
}

/// Each `"quoted phrase"` of the query (an unclosed quote runs to the end) as an FTS5 phrase of
/// its analyzed terms, stop words included: these must appear, in order.
fn phrases(query: &str) -> Vec<String> {
    query
        .split('"')
        .skip(1)
        .step_by(2)
        .map(analyze::index_text)
        .filter(|text| !text.is_empty())
        // Analyzed text is letters, digits and spaces: quoting it makes a plain FTS5 phrase.
        .map(|text| format!("\"{text}\""))
        .collect()
}

/// The candidates matching `fts` within `scope`: the best by FTS5's own bm25, or the newest
/// when every term is very common (`newest`).
fn candidates(
    conn: &Connection,
    fts: &str,
    scope: Scope,
    newest: bool,
) -> Result<Vec<Scored>, rusqlite::Error> {
    const SELECT: &str = "SELECT m.id, m.file_id, m.pos, m.role, m.ts, m.content
         FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
         WHERE messages_fts MATCH ?1 AND m.ts >= ?2 AND m.ts < ?3
           AND (?4 < 0 OR m.file_id = ?4)
           AND NOT (m.file_id = ?5 AND (m.role = ?6 OR m.offset >= ?7))";
    let order = if newest {
        "ORDER BY messages_fts.rowid DESC"
    } else {
        "ORDER BY messages_fts.rank"
    };
    let mut statement = conn.prepare_cached(&format!("{SELECT} {order} LIMIT ?8"))?;
    let rows = statement.query_map(
        params![
            fts,
            scope.since,
            scope.until,
            scope.only_file,
            scope.asking_file,
            ROLE_SUMMARY,
            scope.tail_offset,
            CANDIDATES
        ],
        scored_row,
    )?;
    rows.collect()
}

/// A row of `id, file_id, pos, role, ts[, content]`, not scored yet.
fn scored_row(row: &Row<'_>) -> Result<Scored, rusqlite::Error> {
    Ok(Scored {
        id: row.get(0)?,
        file_id: row.get(1)?,
        pos: row.get(2)?,
        role: row.get(3)?,
        ts: row.get(4)?,
        content: if row.as_ref().column_count() > 5 {
            Some(row.get(5)?)
        } else {
            None
        },
        bm25: 0.0,
        mask: 0,
        asks: false,
        score: 0.0,
    })
}

/// BM25 of `content` for `terms`, and which terms it contains.
fn bm25(content: &str, terms: &[String], stats: &Stats) -> (f64, u64) {
    let words = analyze::terms(content);
    let len = words.len() as f64;
    let mut score = 0.0;
    let mut mask = 0u64;
    for (i, term) in terms.iter().enumerate() {
        let tf = words.iter().filter(|word| word.text == *term).count() as f64;
        if tf == 0.0 {
            continue;
        }
        mask |= 1 << i;
        let norm = K1 * (1.0 - B + B * len / stats.avg_len);
        score += stats.idf[i] * tf * (K1 + 1.0) / (tf + norm);
    }
    (score, mask)
}

/// Adds the in-scope neighbours of the best candidates that are not candidates themselves
/// (their own score is 0: they contain no query term).
fn add_neighbours(
    conn: &Connection,
    scored: &mut Vec<Scored>,
    scope: Scope,
    max: usize,
) -> Result<(), rusqlite::Error> {
    let known: std::collections::HashSet<(i64, i64)> =
        scored.iter().map(|s| (s.file_id, s.pos)).collect();
    let mut order: Vec<usize> = (0..scored.len())
        .filter(|&i| scored[i].role != ROLE_SUMMARY)
        .collect();
    order.sort_by(|&a, &b| scored[b].bm25.total_cmp(&scored[a].bm25));
    order.truncate(max.saturating_mul(3).max(30));
    let mut wanted = Vec::new();
    for i in order {
        for pos in [scored[i].pos - 1, scored[i].pos + 1] {
            let key = (scored[i].file_id, pos);
            if pos >= 0 && !known.contains(&key) && !wanted.contains(&key) {
                wanted.push(key);
            }
        }
    }
    let mut statement = conn.prepare_cached(
        "SELECT id, file_id, pos, role, ts FROM messages
         WHERE file_id = ?1 AND pos = ?2 AND ts >= ?3 AND ts < ?4
           AND NOT (file_id = ?5 AND offset >= ?6)",
    )?;
    for (file_id, pos) in wanted {
        let row = statement
            .query_row(
                params![
                    file_id,
                    pos,
                    scope.since,
                    scope.until,
                    scope.asking_file,
                    scope.tail_offset
                ],
                scored_row,
            )
            .optional()?;
        scored.extend(row);
    }
    Ok(())
}

/// Sets each item's final score: BM25, neighbours, the conversation prior, dates, recency.
fn combine(scored: &mut [Scored], stats: &Stats, windows: &[(i64, i64)]) {
    let best = scored.iter().map(|s| s.bm25).fold(0.0, f64::max);
    if best <= 0.0 {
        return;
    }
    let by_pos: HashMap<(i64, i64), (f64, bool)> = scored
        .iter()
        .filter(|s| s.role != ROLE_SUMMARY)
        .map(|s| ((s.file_id, s.pos), (s.bm25, s.asks)))
        .collect();
    // Matching messages of each file, by position, for the conversation prior.
    let mut matching: HashMap<i64, Vec<(i64, u64)>> = HashMap::new();
    for s in scored
        .iter()
        .filter(|s| s.role != ROLE_SUMMARY && s.mask != 0)
    {
        matching.entry(s.file_id).or_default().push((s.pos, s.mask));
    }
    for list in matching.values_mut() {
        list.sort_unstable();
    }
    let priors: Vec<f64> = scored
        .iter()
        .map(|s| {
            if s.role == ROLE_SUMMARY {
                return 0.0;
            }
            let list = matching.get(&s.file_id).map_or(&[][..], Vec::as_slice);
            let from = list.partition_point(|(pos, _)| *pos < s.pos - WINDOW);
            let mut counts = [0u32; MAX_TERMS];
            for (_, mask) in list[from..]
                .iter()
                .take_while(|(pos, _)| *pos <= s.pos + WINDOW)
            {
                for (i, count) in counts.iter_mut().enumerate().take(stats.idf.len()) {
                    *count += u32::from(mask & (1 << i) != 0);
                }
            }
            counts
                .iter()
                .zip(&stats.idf)
                .map(|(&c, idf)| idf * f64::from(c) / (f64::from(c) + K1))
                .sum()
        })
        .collect();
    let best_prior = priors.iter().copied().fold(0.0, f64::max);
    let (oldest, newest) = scored.iter().fold((i64::MAX, i64::MIN), |(lo, hi), s| {
        (lo.min(s.ts), hi.max(s.ts))
    });
    let span = (newest - oldest).max(1) as f64;
    for (s, prior) in scored.iter_mut().zip(priors) {
        let mut score = s.bm25;
        if s.role != ROLE_SUMMARY {
            if let Some(&(before, asks)) = by_pos.get(&(s.file_id, s.pos - 1)) {
                score += before * if asks { REPLY_WEIGHT } else { NEIGHBOUR_WEIGHT };
            }
            if let Some(&(after, _)) = by_pos.get(&(s.file_id, s.pos + 1)) {
                score += after * NEIGHBOUR_WEIGHT;
            }
            if best_prior > 0.0 {
                score += WINDOW_WEIGHT * best * prior / best_prior;
            }
            if windows.iter().any(|&(from, to)| (from..to).contains(&s.ts)) {
                score += DATE_WEIGHT * best;
            }
        }
        s.score = score * (1.0 + RECENCY_WEIGHT * (s.ts - oldest) as f64 / span);
    }
}

/// Loads the hits' text and context.
fn hits(conn: &Connection, scored: Vec<Scored>) -> Result<Vec<Hit>, rusqlite::Error> {
    let mut session = conn.prepare_cached("SELECT session FROM files WHERE id = ?1")?;
    let mut by_id = conn.prepare_cached("SELECT role, ts, content FROM messages WHERE id = ?1")?;
    let mut at = conn
        .prepare_cached("SELECT role, ts, content FROM messages WHERE file_id = ?1 AND pos = ?2")?;
    let mut out = Vec::with_capacity(scored.len());
    for s in scored {
        let name: String = session.query_row(params![s.file_id], |row| row.get(0))?;
        // Candidates were read with their text; only added neighbours need it fetched.
        let found = match s.content {
            Some(content) => indexed(s.role, s.ts, content),
            None => by_id.query_row(params![s.id], |row| message(row, 0))?,
        };
        let summary = s.role == ROLE_SUMMARY;
        let mut neighbour = |pos: i64| {
            if summary || pos < 0 {
                return Ok(None);
            }
            at.query_row(params![s.file_id, pos], |row| message(row, 0))
                .optional()
        };
        let before = neighbour(s.pos - 1)?;
        let after = neighbour(s.pos + 1)?;
        out.push(Hit {
            session: name,
            summary,
            message: found,
            before,
            after,
        });
    }
    Ok(out)
}

/// Reads `role, ts, content` starting at column `first`.
pub(super) fn message(row: &Row<'_>, first: usize) -> Result<IndexedMessage, rusqlite::Error> {
    Ok(indexed(
        row.get(first)?,
        row.get(first + 1)?,
        row.get(first + 2)?,
    ))
}

/// A message from its stored role code, timestamp (Unix milliseconds) and text.
fn indexed(role: i64, millis: i64, content: String) -> IndexedMessage {
    let role = match role {
        ROLE_USER => Role::User,
        ROLE_ASSISTANT => Role::Assistant,
        _ => Role::System,
    };
    IndexedMessage {
        role,
        timestamp: DateTime::<Utc>::from_timestamp_millis(millis).unwrap_or_default(),
        content,
    }
}
