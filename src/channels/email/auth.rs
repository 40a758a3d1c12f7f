//! Whether a mail's From can be believed: the receiving server's `Authentication-Results`.
//!
//! Anyone can write the owner's address into From, and anyone can write an
//! `Authentication-Results` header into the mail they send. squidbot does not check DKIM
//! itself (that takes DNS and a crypto stack for every mail, which the receiving mail server
//! has already done); it believes the verdict of the one server the owner names,
//! `channels.email.authserv_id`, as RFC 8601 §5 and §7 intend:
//!
//! - only headers whose authserv-id is the configured one count: any other is ignored;
//! - of those, only the **topmost**: a receiving server prepends its verdict above every header
//!   the mail arrived with, so a header further down carrying the same authserv-id was written
//!   by the sender (or by a server before ours) and proves nothing;
//! - that header must report `dkim=pass` for a signing domain (`header.d`) aligned with the
//!   From domain: the same domain, or one the From domain is a subdomain of (relaxed alignment:
//!   anyone who can send signed mail for the owner's domain passes).
//!
//! The header is read with the RFC 8601 §2.2 grammar: comments (nested, with quoted pairs)
//! are white space wherever they stand, values may be quoted strings (a `;` or `(` inside one
//! is text), and `ptype.property` may carry white space around its dot. A header that does not
//! parse is no verdict. Anything else (no header of that server, `dkim=fail`, a signature of
//! another domain, no authserv-id configured, two From addresses, a Sender that is not the
//! From) leaves the mail unauthenticated: it is answered like anyone's, never as the owner's.

/// What the From and Sender headers say of who sent a mail: the identity is one address only
/// when the mail names exactly one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Identity {
    /// One From header with one address, and no Sender naming someone else.
    #[default]
    Single,
    /// More than one From header, or one naming several addresses: which one "sent" it is
    /// the reader's guess, so none of them is believed.
    SeveralFrom,
    /// A Sender header naming another address than From (RFC 5322 §3.6.2: the agent that
    /// really sent it): the From is not the sender's own claim.
    OtherSender,
}

/// Whether the topmost `Authentication-Results` header of server `authserv_id` among `headers`
/// (every such header's value, topmost first) says that server verified a DKIM signature
/// aligned with the From address `sender`.
pub fn owner_authenticated(headers: &[String], authserv_id: &str, sender: &str) -> bool {
    let authserv_id = authserv_id.trim();
    if authserv_id.is_empty() {
        return false;
    }
    let Some((_, from_domain)) = sender.rsplit_once('@') else {
        return false;
    };
    let from_domain = from_domain.trim().to_ascii_lowercase();
    // The topmost header that names this server; a header whose authserv-id cannot be read
    // names no server.
    let ours = headers
        .iter()
        .map(|header| Results::parse(header))
        .find(|parsed| match parsed {
            Ok(results) => results.authserv_id.eq_ignore_ascii_case(authserv_id),
            Err(Malformed { authserv_id: id }) => id
                .as_deref()
                .is_some_and(|id| id.eq_ignore_ascii_case(authserv_id)),
        });
    let Some(Ok(results)) = ours else {
        return false;
    };
    results.methods.iter().any(|method| {
        method.name.eq_ignore_ascii_case("dkim")
            && method.result.eq_ignore_ascii_case("pass")
            && method.properties.iter().any(|(key, value)| {
                key.eq_ignore_ascii_case("header.d") && aligned(&from_domain, value)
            })
    })
}

/// Relaxed alignment: the signing domain is the From domain or a parent of it.
fn aligned(from_domain: &str, signing: &str) -> bool {
    let signing = signing.trim().to_ascii_lowercase();
    !signing.is_empty() && (from_domain == signing || from_domain.ends_with(&format!(".{signing}")))
}

/// One parsed `Authentication-Results` value.
#[derive(Debug, PartialEq, Eq)]
struct Results {
    authserv_id: String,
    methods: Vec<Method>,
}

/// One `resinfo`: `method=result` and its properties (`reason` and `ptype.property`).
#[derive(Debug, PartialEq, Eq)]
struct Method {
    /// The method without its version (`dkim/1` is `dkim`).
    name: String,
    result: String,
    /// `(ptype.property, value)`, keys with the white space around the dot removed.
    properties: Vec<(String, String)>,
}

/// A value that does not follow the grammar; the authserv-id when it could be read, so that a
/// malformed header of the configured server still hides the headers below it.
#[derive(Debug, PartialEq, Eq)]
struct Malformed {
    authserv_id: Option<String>,
}

/// A lexical token of the header value: comments and white space are dropped between tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Semicolon,
    Equals,
    /// A run of other characters, or a quoted string's text (unescaped).
    Word(String),
}

impl Results {
    fn parse(value: &str) -> Result<Self, Malformed> {
        let tokens = tokens(value).ok_or(Malformed { authserv_id: None })?;
        let mut clauses = tokens.split(|token| *token == Token::Semicolon);
        let head = clauses.next().unwrap_or_default();
        // `authserv-id [version]`.
        let authserv_id = match head {
            [Token::Word(id)] => id.clone(),
            [Token::Word(id), Token::Word(version)]
                if version.chars().all(|c| c.is_ascii_digit()) =>
            {
                id.clone()
            }
            _ => return Err(Malformed { authserv_id: None }),
        };
        let malformed = || Malformed {
            authserv_id: Some(authserv_id.clone()),
        };
        let mut methods = Vec::new();
        for clause in clauses {
            match clause {
                // `; none`: no result (only where it is the whole of it, checked below).
                [Token::Word(word)] if word.eq_ignore_ascii_case("none") => continue,
                [
                    Token::Word(method),
                    Token::Equals,
                    Token::Word(result),
                    rest @ ..,
                ] => {
                    let name = method.split('/').next().unwrap_or_default().trim();
                    methods.push(Method {
                        name: name.to_owned(),
                        result: result.clone(),
                        properties: properties(rest).ok_or_else(malformed)?,
                    });
                }
                _ => return Err(malformed()),
            }
        }
        Ok(Self {
            authserv_id,
            methods,
        })
    }
}

/// `key = value` pairs; a key may be several words (`header . d`), joined without spaces.
fn properties(tokens: &[Token]) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut key = String::new();
    let mut rest = tokens.iter();
    while let Some(token) = rest.next() {
        match token {
            Token::Word(word) => key.push_str(word),
            Token::Equals if !key.is_empty() => {
                let Some(Token::Word(value)) = rest.next() else {
                    return None;
                };
                out.push((std::mem::take(&mut key), value.clone()));
            }
            _ => return None,
        }
    }
    key.is_empty().then_some(out)
}

/// The tokens of `value`, or `None` when a quoted string or a comment is left open.
fn tokens(value: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = value.chars().peekable();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut Vec<Token>| {
        if !word.is_empty() {
            out.push(Token::Word(std::mem::take(word)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            ';' | '=' => {
                flush(&mut word, &mut out);
                out.push(if c == ';' {
                    Token::Semicolon
                } else {
                    Token::Equals
                });
            }
            '(' => {
                flush(&mut word, &mut out);
                skip_comment(&mut chars)?;
            }
            '"' => {
                flush(&mut word, &mut out);
                out.push(Token::Word(quoted(&mut chars)?));
            }
            c if c.is_whitespace() => flush(&mut word, &mut out),
            c => word.push(c),
        }
    }
    flush(&mut word, &mut out);
    Some(out)
}

/// Skips a comment whose `(` was read: nested comments and quoted pairs included.
fn skip_comment(chars: &mut impl Iterator<Item = char>) -> Option<()> {
    let mut depth = 1usize;
    while depth > 0 {
        match chars.next()? {
            '\\' => {
                chars.next()?;
            }
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
    }
    Some(())
}

/// The text of a quoted string whose `"` was read, quoted pairs unescaped.
fn quoted(chars: &mut impl Iterator<Item = char>) -> Option<String> {
    let mut text = String::new();
    loop {
        match chars.next()? {
            '\\' => text.push(chars.next()?),
            '"' => return Some(text),
            c => text.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "mx.example.org";

    fn check(results: &str, sender: &str) -> bool {
        owner_authenticated(&[results.to_owned()], ID, sender)
    }

    #[test]
    fn only_an_aligned_dkim_pass_from_the_named_server_counts() {
        let pass = "mx.example.org; dkim=pass header.d=example.org header.s=s1; spf=pass";
        assert!(check(pass, "alex@example.org"));
        assert!(check(pass, "alex@mail.example.org"), "a subdomain aligns");
        assert!(check(
            "MX.example.org 1; spf=fail; DKIM=Pass (good signature) header.d=\"example.org\"",
            "alex@example.org"
        ));
        for (results, why) in [
            (
                "mx.example.org; dkim=fail header.d=example.org",
                "a failed signature",
            ),
            (
                "mx.example.org; dkim=pass header.d=attacker.net",
                "another domain's signature",
            ),
            (
                "mx.example.org; dkim=pass header.d=ample.org",
                "a suffix that is not a parent",
            ),
            (
                "evil.net; dkim=pass header.d=example.org",
                "another server's verdict",
            ),
            (
                "mx.example.org; spf=pass smtp.mailfrom=example.org",
                "SPF alone",
            ),
            (
                "mx.example.org; dkim=pass (header.d=example.org)",
                "a comment",
            ),
            ("mx.example.org; none", "no result"),
            (
                "mx.example.org; dkim=pass header.d=",
                "a property without a value",
            ),
            (
                "mx.example.org; dkim=pass (open comment header.d=example.org",
                "an open comment",
            ),
        ] {
            assert!(!check(results, "alex@example.org"), "{why}: {results}");
        }
        assert!(!owner_authenticated(&[], ID, "alex@example.org"));
        assert!(!owner_authenticated(&[pass.into()], "", "alex@example.org"));
        assert!(!check(pass, "no-at-sign"));
    }

    /// The Critical of issue 35: the server prepends its verdict; a header the sender wrote
    /// below it with the server's id was read (mail-parser's `header_raw` returns the last).
    #[test]
    fn only_the_topmost_header_of_the_named_server_counts() {
        let server = "mx.example.org; dkim=none; spf=softfail smtp.mailfrom=example.org";
        let forged = "mx.example.org; dkim=pass header.d=example.org";
        let headers = [server.to_owned(), forged.to_owned()];
        assert!(!owner_authenticated(&headers, ID, "alex@example.org"));
        // Another server's header above ours is skipped, not taken as ours.
        let headers = [
            "relay.other.net; dkim=fail".to_owned(),
            "mx.example.org; dkim=pass header.d=example.org".to_owned(),
        ];
        assert!(owner_authenticated(&headers, ID, "alex@example.org"));
        // A malformed header of our server still stands for it: what is below it is not read.
        let headers = [
            "mx.example.org; dkim=pass header.d".to_owned(),
            forged.to_owned(),
        ];
        assert!(!owner_authenticated(&headers, ID, "alex@example.org"));
    }

    #[test]
    fn the_grammar_takes_quoted_strings_comments_and_spaced_properties() {
        // A `;` inside a quoted string or a comment is text, not a new result.
        assert!(check(
            "mx.example.org (v=1; x); dkim=pass reason=\"good; dkim=fail\" header.d=example.org",
            "alex@example.org"
        ));
        assert!(!check(
            "mx.example.org; dkim=fail reason=\"x; dkim=pass header.d=example.org\"",
            "alex@example.org"
        ));
        assert!(!check(
            "mx.example.org; dkim=fail (; dkim=pass header.d=example.org)",
            "alex@example.org"
        ));
        assert!(check(
            "\"mx.example.org\"; dkim = pass header . d = example.org (nested (comment))",
            "alex@example.org"
        ));
        assert!(check(
            "mx.example.org; dkim/1=pass header.d=\"exa\\mple.org\"",
            "alex@example.org"
        ));
        assert_eq!(
            Results::parse("mx.example.org; dkim=pass header.i=@example.org"),
            Ok(Results {
                authserv_id: ID.into(),
                methods: vec![Method {
                    name: "dkim".into(),
                    result: "pass".into(),
                    properties: vec![("header.i".into(), "@example.org".into())],
                }],
            })
        );
    }
}
