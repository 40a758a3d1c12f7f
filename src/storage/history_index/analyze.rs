//! Text analysis shared by indexing and querying: words, lower case, English stems, stop words.
//!
//! One function cuts text into terms for both sides, so a message and a question that use
//! different forms of a word ("painted", "painting") meet on the same term ("paint"). Only
//! ASCII-letter words are stemmed, with the Snowball English stemmer: a word of another script
//! or with accents is kept as written (lower-cased), so other languages still match exactly
//! instead of being cut by English rules. Stop words are dropped from queries only; the index
//! keeps every word, so document lengths and phrases stay true.

use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

/// One term of a text and where its word lies (byte range of the original text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The normalized term (lower case, stemmed when English).
    pub text: String,
    /// Byte offset where the word starts.
    pub start: usize,
    /// Byte offset just after the word.
    pub end: usize,
}

/// The longest word indexed whole, in bytes; a longer run of letters (a pasted base64 blob, a
/// 400 000-character "word") is indexed as its first this many bytes, unstemmed. No real word
/// is this long, and without a bound one message made stemming, the index and every later
/// search that touched it cost seconds of CPU.
pub const MAX_WORD_BYTES: usize = 64;

fn stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// The terms of `text`, in order, with their positions.
///
/// Words are the maximal runs of letters and digits (so `don't` is `don` + `t`, and `e-mail`
/// is `e` + `mail`, exactly as the index's FTS5 tokenizer splits the analyzed text).
pub fn terms(text: &str) -> Vec<Term> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push(Term {
                    text: normalize(&text[s..i]),
                    start: s,
                    end: i,
                });
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// One word (letters and digits only) as its index term.
fn normalize(word: &str) -> String {
    if word.len() > MAX_WORD_BYTES {
        let mut end = MAX_WORD_BYTES;
        while !word.is_char_boundary(end) {
            end -= 1;
        }
        return word[..end].to_lowercase();
    }
    let lower = word.to_lowercase();
    if lower.bytes().all(|b| b.is_ascii_lowercase()) {
        stemmer().stem(&lower).into_owned()
    } else {
        lower
    }
}

/// The text FTS5 indexes for `content`: its terms separated by spaces.
pub fn index_text(content: &str) -> String {
    let terms = terms(content);
    let mut out = String::with_capacity(content.len());
    for (i, term) in terms.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&term.text);
    }
    out
}

/// Whether `word` (lower case, unstemmed) carries no meaning for search.
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// The distinct terms of a query worth searching for: its words less the stop words, or all of
/// its words when every one is a stop word ("who am I?" still searches), in order of appearance.
pub fn query_terms(query: &str) -> Vec<String> {
    let words = terms(query);
    let meaningful: Vec<&Term> = words
        .iter()
        .filter(|term| !is_stop_word(&query[term.start..term.end].to_lowercase()))
        .collect();
    let chosen: Vec<&Term> = if meaningful.is_empty() {
        words.iter().collect()
    } else {
        meaningful
    };
    let mut out: Vec<String> = Vec::with_capacity(chosen.len());
    for term in chosen {
        if !out.contains(&term.text) {
            out.push(term.text.clone());
        }
    }
    out
}

/// English function words, question words and contraction pieces, sorted for binary search.
/// Questions ("what did Caroline research?") are mostly these; the rest is what to look for.
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "cannot",
    "could",
    "couldn",
    "d",
    "did",
    "didn",
    "do",
    "does",
    "doesn",
    "doing",
    "don",
    "down",
    "during",
    "each",
    "ever",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn",
    "has",
    "hasn",
    "have",
    "haven",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "isn",
    "it",
    "its",
    "itself",
    "just",
    "kind",
    "let",
    "ll",
    "m",
    "me",
    "might",
    "more",
    "most",
    "must",
    "mustn",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "ought",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "shan",
    "she",
    "should",
    "shouldn",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "us",
    "ve",
    "very",
    "was",
    "wasn",
    "we",
    "were",
    "weren",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "won",
    "would",
    "wouldn",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn english_words_meet_on_their_stem_and_other_scripts_stay_whole() {
        let texts = |s: &str| terms(s).into_iter().map(|t| t.text).collect::<Vec<_>>();
        assert_eq!(
            texts("Painted PAINTING paints"),
            ["paint", "paint", "paint"]
        );
        assert_eq!(texts("Häuser in Zürich"), ["häuser", "in", "zürich"]);
        assert_eq!(texts("東京 2023"), ["東京", "2023"]);
        assert_eq!(texts("Caroline's e-mail"), ["carolin", "s", "e", "mail"]);
    }

    #[test]
    fn positions_point_at_the_words() {
        let text = "  Hello, wörld!";
        let found = terms(text);
        assert_eq!(&text[found[0].start..found[0].end], "Hello");
        assert_eq!(&text[found[1].start..found[1].end], "wörld");
    }

    #[test]
    fn a_question_keeps_only_what_to_look_for() {
        assert_eq!(
            query_terms("What did Caroline research?"),
            ["carolin", "research"]
        );
        assert_eq!(query_terms("who am I"), ["who", "am", "i"]);
        assert_eq!(query_terms("paint painted"), ["paint"]);
        assert!(query_terms("?!").is_empty());
    }

    #[test]
    fn the_index_text_is_the_terms_joined() {
        assert_eq!(index_text("I went running, twice!"), "i went run twice");
    }

    #[test]
    fn a_word_longer_than_any_real_one_is_indexed_by_its_start() {
        let blob = "Ab".repeat(200_000);
        let text = format!("see {blob} and ünïcödé{}", "é".repeat(100));
        let terms = terms(&text);
        assert_eq!(terms.len(), 4);
        assert_eq!(terms[1].text, "ab".repeat(32));
        assert_eq!((terms[1].start, terms[1].end), (4, 4 + blob.len()));
        assert!(terms[3].text.len() <= MAX_WORD_BYTES, "{}", terms[3].text);
        assert!(terms[3].text.starts_with("ünïcödé"));
        // The query side cuts the same way, so the blob is still found by itself.
        assert_eq!(query_terms(&blob), ["ab".repeat(32)]);
    }
}
