//! Calendar dates written in a query ("on 3 June, 2023", "May 23, 2023", "in July 2023",
//! "2023-06-03"): they say *when* something was said, not words to match.
//!
//! [`extract`] finds them and returns the query without them, so "what did Gina find on
//! 1 February, 2023" searches for "Gina find" among the messages of that day instead of for
//! every message containing "1" or "2023". Only absolute dates in English month names or ISO
//! form are read; relative ones ("last week") need a reference the index does not have.

use chrono::NaiveDate;

use super::analyze;

/// A date range a query names, inclusive (a month is its first to its last day).
pub type DateRange = (NaiveDate, NaiveDate);

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The month a word names (`"June"`, `"jun"`, `"Sept"`), 1-based.
fn month(word: &str) -> Option<u32> {
    let word = word.to_lowercase();
    if word.len() < 3 {
        return None;
    }
    let position = MONTHS
        .iter()
        .position(|name| *name == word || (word.len() <= 4 && name.starts_with(&word)))?;
    Some(position as u32 + 1)
}

/// A day of the month: `3`, `03`, `3rd`, `21st`.
fn day(word: &str) -> Option<u32> {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    if !["", "st", "nd", "rd", "th"].contains(&suffix.to_lowercase().as_str()) {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

/// A year: four digits between 1900 and 2199.
fn year(word: &str) -> Option<i32> {
    (word.len() == 4)
        .then(|| word.parse().ok())
        .flatten()
        .filter(|y| (1900..2200).contains(y))
}

/// The last day of `year`-`month`.
fn month_end(year: i32, month: u32) -> Option<NaiveDate> {
    let (y, m) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    NaiveDate::from_ymd_opt(y, m, 1)?.pred_opt()
}

/// The date ranges written in `query`, and the query with them (and an "on"/"in" before them)
/// blanked out.
pub fn extract(query: &str) -> (Vec<DateRange>, String) {
    let words: Vec<(usize, usize)> = analyze::terms(query)
        .iter()
        .map(|term| (term.start, term.end))
        .collect();
    let text = |i: usize| words.get(i).map(|&(s, e)| &query[s..e]);
    let mut ranges = Vec::new();
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let found = iso(query, words[i].0)
            .map(|(range, end)| (range, i, words.iter().take_while(|w| w.0 < end).count()))
            .or_else(|| named(&text, i).map(|(range, len)| (range, i, i + len)));
        let Some((range, first, after)) = found else {
            i += 1;
            continue;
        };
        let mut from = words[first].0;
        if first > 0
            && let Some(word) = text(first - 1)
            && ["on", "in", "of"].contains(&word.to_lowercase().as_str())
        {
            from = words[first - 1].0;
        }
        cut.push((from, words[after - 1].1));
        ranges.push(range);
        i = after;
    }
    let mut rest = String::with_capacity(query.len());
    let mut at = 0;
    for (from, to) in cut {
        rest.push_str(&query[at..from]);
        rest.push(' ');
        at = to;
    }
    rest.push_str(&query[at..]);
    (ranges, rest)
}

/// `YYYY-MM-DD` or `YYYY-MM` starting at byte `at`; the range and where it ends.
fn iso(query: &str, at: usize) -> Option<(DateRange, usize)> {
    let bytes = query.as_bytes();
    let digits = |from: usize, n: usize| -> Option<u32> {
        let slice = bytes.get(from..from + n)?;
        slice
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| std::str::from_utf8(slice).ok()?.parse().ok())
            .flatten()
    };
    let y = year(std::str::from_utf8(bytes.get(at..at + 4)?).ok()?)?;
    if bytes.get(at + 4) != Some(&b'-') {
        return None;
    }
    let m = digits(at + 5, 2)?;
    let boundary = |i: usize| bytes.get(i).is_none_or(|b| !b.is_ascii_alphanumeric());
    if bytes.get(at + 7) == Some(&b'-')
        && let Some(d) = digits(at + 8, 2)
        && boundary(at + 10)
    {
        let date = NaiveDate::from_ymd_opt(y, m, d)?;
        return Some(((date, date), at + 10));
    }
    if !boundary(at + 7) {
        return None;
    }
    Some((
        (NaiveDate::from_ymd_opt(y, m, 1)?, month_end(y, m)?),
        at + 7,
    ))
}

/// A date in words starting at word `i`: `D Month [,] YYYY`, `Month D [,] YYYY` or
/// `Month YYYY`; the range and how many words it took.
fn named<'a>(text: &impl Fn(usize) -> Option<&'a str>, i: usize) -> Option<(DateRange, usize)> {
    let first = text(i)?;
    if let Some(d) = day(first) {
        let mut next = i + 1;
        if text(next).is_some_and(|w| w.eq_ignore_ascii_case("of")) {
            next += 1;
        }
        let m = month(text(next)?)?;
        let y = year(text(next + 1)?)?;
        let date = NaiveDate::from_ymd_opt(y, m, d)?;
        return Some(((date, date), next + 2 - i));
    }
    let m = month(first)?;
    if let Some(d) = text(i + 1).and_then(day)
        && let Some(y) = text(i + 2).and_then(year)
    {
        let date = NaiveDate::from_ymd_opt(y, m, d)?;
        return Some(((date, date), 3));
    }
    let y = year(text(i + 1)?)?;
    Some(((NaiveDate::from_ymd_opt(y, m, 1)?, month_end(y, m)?), 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    #[test]
    fn days_and_months_in_the_usual_forms() {
        let one = |q: &str| extract(q).0;
        let june3 = vec![(date(2023, 6, 3), date(2023, 6, 3))];
        assert_eq!(one("what did she say on 3 June, 2023?"), june3);
        assert_eq!(one("June 3rd, 2023"), june3);
        assert_eq!(one("the 3rd of June 2023"), june3);
        assert_eq!(one("2023-06-03"), june3);
        let july = vec![(date(2023, 7, 1), date(2023, 7, 31))];
        assert_eq!(one("in July 2023"), july);
        assert_eq!(one("2023-07"), july);
        assert_eq!(
            one("Dec 2024"),
            vec![(date(2024, 12, 1), date(2024, 12, 31))]
        );
        assert_eq!(one("February 30, 2023"), vec![]);
    }

    #[test]
    fn the_rest_of_the_query_keeps_its_words() {
        let (ranges, rest) = extract("What did Gina find on 1 February, 2023 for her store?");
        assert_eq!(ranges, vec![(date(2023, 2, 1), date(2023, 2, 1))]);
        assert_eq!(
            rest.split_whitespace().collect::<Vec<_>>(),
            ["What", "did", "Gina", "find", "for", "her", "store?"]
        );
    }

    #[test]
    fn numbers_and_months_alone_are_not_dates() {
        assert!(extract("I ran 5 miles in 2023").0.is_empty());
        assert!(extract("may I ask about march 12").0.is_empty());
        assert!(extract("version 2023-13-01").0.is_empty());
    }
}
