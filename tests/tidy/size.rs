//! Size rules, so the code stays in rooms a reader can take in (issue 37):
//!
//! - core's production code (`src/core`, without `#[cfg(test)]` items and tests files) stays at
//!   or under [`CORE_MAX_LINES`] lines of code: non-blank lines once comments are blanked, so
//!   the doc comments the style asks for never count against the budget;
//! - no production function in `src/` runs over [`FN_MAX_LINES`] lines, from its `fn` line to
//!   its closing brace (test code excluded);
//! - the agent loop's `converse`, which only loops, stays at or under [`CONVERSE_MAX_LINES`]
//!   lines, and `src/core/agent_loop.rs` at or under [`AGENT_LOOP_MAX_LINES`].
//!
//! Each check is a function from text to problems; `the_size_checks_catch_planted_violations`
//! feeds each a violation it must report.

use super::{code_only, files_under, is_test_file, report, without_test_items};

/// The most lines of code core's production files may hold together.
const CORE_MAX_LINES: usize = 4_000;
/// The most lines one production function may span.
const FN_MAX_LINES: usize = 120;
/// The most lines `converse` may span.
const CONVERSE_MAX_LINES: usize = 80;
/// The most lines `src/core/agent_loop.rs` may have.
const AGENT_LOOP_MAX_LINES: usize = 400;

/// Lines of production code in `text`: non-blank once comments, string contents and
/// `#[cfg(test)]` items are blanked.
fn code_lines(text: &str) -> usize {
    without_test_items(&code_only(text))
        .lines()
        .filter(|line| !line.trim().is_empty())
        .count()
}

/// Every function with a body in `code` (from [`code_only`], test items blanked): its name,
/// the 1-based line of its `fn` and how many lines it spans to its closing brace.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let line_at = |i: usize| chars[..i].iter().filter(|&&c| c == '\n').count() + 1;
    let mut found = Vec::new();
    let mut i = 0;
    while i + 2 < chars.len() {
        let starts_word = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if !(starts_word && chars[i] == 'f' && chars[i + 1] == 'n' && chars[i + 2] == ' ') {
            i += 1;
            continue;
        }
        let name: String = chars[i + 3..]
            .iter()
            .skip_while(|c| c.is_whitespace())
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        // The body opens at the first `{` outside parentheses and brackets; a `;` there first
        // is a declaration without a body (a trait's).
        let mut j = i + 2;
        let mut depth = 0i32;
        let mut open = None;
        while j < chars.len() {
            match chars[j] {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        let Some(open) = open else {
            i = j;
            continue;
        };
        let mut braces = 0usize;
        let mut close = open;
        for (k, c) in chars.iter().enumerate().skip(open) {
            match *c {
                '{' => braces += 1,
                '}' => {
                    braces -= 1;
                    if braces == 0 {
                        close = k;
                        break;
                    }
                }
                _ => {}
            }
        }
        if !name.is_empty() {
            found.push((name, line_at(i), line_at(close) - line_at(i) + 1));
        }
        // Nested functions are measured too: go on inside the body.
        i = open + 1;
    }
    found
}

/// Problems: production functions of `text` longer than `limit` lines.
fn check_function_length(rel: &str, text: &str, limit: usize) -> Vec<String> {
    functions(&without_test_items(&code_only(text)))
        .into_iter()
        .filter(|(_, _, lines)| *lines > limit)
        .map(|(name, line, lines)| {
            format!("{rel}:{line}: fn {name} is {lines} lines (limit {limit})")
        })
        .collect()
}

/// Problems: core's production code over [`CORE_MAX_LINES`], with the largest files named.
fn check_core_size(files: &[(String, String)], limit: usize) -> Vec<String> {
    let mut sizes: Vec<(usize, &str)> = files
        .iter()
        .filter(|(rel, _)| !is_test_file(rel))
        .map(|(rel, text)| (code_lines(text), rel.as_str()))
        .collect();
    let total: usize = sizes.iter().map(|(n, _)| n).sum();
    if total <= limit {
        return Vec::new();
    }
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let largest: Vec<String> = sizes
        .iter()
        .take(5)
        .map(|(n, rel)| format!("{rel} {n}"))
        .collect();
    vec![format!(
        "core holds {total} lines of production code (limit {limit}); largest: {}",
        largest.join(", ")
    )]
}

/// Problems: the agent loop's file or its `converse` over their limits.
fn check_agent_loop(
    rel: &str,
    text: &str,
    file_limit: usize,
    converse_limit: usize,
) -> Vec<String> {
    let mut problems = Vec::new();
    let lines = text.lines().count();
    if lines > file_limit {
        problems.push(format!("{rel}: {lines} lines (limit {file_limit})"));
    }
    let converse = functions(&without_test_items(&code_only(text)))
        .into_iter()
        .find(|(name, _, _)| name == "converse");
    match converse {
        Some((_, line, lines)) if lines > converse_limit => problems.push(format!(
            "{rel}:{line}: fn converse is {lines} lines (limit {converse_limit}): it only loops"
        )),
        Some(_) => {}
        None => problems.push(format!("{rel}: no fn converse")),
    }
    problems
}

#[test]
fn core_production_code_stays_small() {
    report(
        "core on a diet",
        check_core_size(&files_under(&["src/core"]), CORE_MAX_LINES),
    );
}

#[test]
fn no_production_function_is_long() {
    let problems = files_under(&["src"])
        .iter()
        .filter(|(rel, _)| !is_test_file(rel))
        .flat_map(|(rel, text)| check_function_length(rel, text, FN_MAX_LINES))
        .collect();
    report("functions to split", problems);
}

#[test]
fn the_agent_loop_only_loops() {
    let rel = "src/core/agent_loop.rs";
    let text = std::fs::read_to_string(super::root().join(rel)).unwrap();
    report(
        "the agent loop",
        check_agent_loop(rel, &text, AGENT_LOOP_MAX_LINES, CONVERSE_MAX_LINES),
    );
}

#[test]
fn the_size_checks_catch_planted_violations() {
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    // A long function, a long one behind a signature with brackets and a `where`, and a trait
    // declaration (no body) and a test function, neither of which counts.
    let long = format!(
        "//! x\ntrait T {{ fn decl(&self) -> [u8; 4]; }}\nfn long() {{\n{}}}\n\
         fn generic<T>(a: [u8; 2]) -> Vec<T>\nwhere\n    T: Clone,\n{{\n{}}}\n\
         #[cfg(test)]\nfn in_test() {{\n{}}}\nfn short() {{ let s = \"fn fake() {{\"; }}\n",
        body(4),
        body(4),
        body(40)
    );
    let problems = check_function_length("src/a.rs", &long, 5);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("fn long is 6 lines"), "{problems:?}");
    assert!(
        problems[1].contains("fn generic is 9 lines"),
        "{problems:?}"
    );
    assert!(check_function_length("src/a.rs", &long, 9).is_empty());

    // Comments, blank lines, test items and tests files do not count towards core's size.
    let files = vec![
        (
            "src/core/a.rs".to_owned(),
            "//! doc\n\n/// doc\nfn a() {}\nfn b() {}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n"
                .to_owned(),
        ),
        ("src/core/b/tests.rs".to_owned(), "fn t() {}\n".repeat(50)),
        ("src/core/c.rs".to_owned(), "fn c() {}\n".to_owned()),
    ];
    assert!(check_core_size(&files, 3).is_empty());
    let over = check_core_size(&files, 2);
    assert_eq!(over.len(), 1, "{over:?}");
    assert!(
        over[0].contains("3 lines of production code (limit 2)"),
        "{over:?}"
    );

    // The agent loop: too many lines, and a converse that does more than loop.
    let agent = format!(
        "//! x\nimpl A {{\n    async fn converse(&self) {{\n{}    }}\n}}\n",
        body(6)
    );
    assert!(check_agent_loop("src/core/agent_loop.rs", &agent, 100, 8).is_empty());
    let problems = check_agent_loop("src/core/agent_loop.rs", &agent, 5, 7);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("lines (limit 5)"), "{problems:?}");
    assert!(
        problems[1].contains("fn converse is 8 lines (limit 7)"),
        "{problems:?}"
    );
    assert_eq!(
        check_agent_loop("src/core/agent_loop.rs", "//! x\n", 5, 7),
        vec!["src/core/agent_loop.rs: no fn converse".to_owned()]
    );
}
