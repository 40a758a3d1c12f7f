//! Whether a mail's From can be believed: the receiving server's `Authentication-Results`.
//!
//! Anyone can write the owner's address into From. squidbot does not check DKIM itself (that
//! takes DNS and a crypto stack for every mail, which the receiving mail server has already
//! done); it believes the verdict of the one server the owner names, `channels.email.
//! authserv_id`, as RFC 8601 intends: only the topmost `Authentication-Results` header counts
//! (the receiving server adds it last, above anything the sender wrote), it must carry that
//! authserv-id, and it must report `dkim=pass` for a signing domain (`header.d`) aligned with
//! the From domain (the same domain, or one the From domain is a subdomain of). Anything else
//! (no header, another server's, `dkim=fail`, a signature of another domain, no authserv-id
//! configured) leaves the mail unauthenticated: it is answered like anyone's, never as the
//! owner's.

/// Whether `results` (the topmost `Authentication-Results` value) says that server
/// `authserv_id` verified a DKIM signature aligned with the From address `sender`.
pub fn owner_authenticated(results: Option<&str>, authserv_id: &str, sender: &str) -> bool {
    let (Some(results), false) = (results, authserv_id.trim().is_empty()) else {
        return false;
    };
    let Some((_, from_domain)) = sender.rsplit_once('@') else {
        return false;
    };
    let from_domain = from_domain.trim().to_ascii_lowercase();
    let results = without_comments(results);
    let mut parts = results.split(';');
    // `authserv-id [version]`.
    let server = parts.next().unwrap_or_default();
    let server = server.split_whitespace().next().unwrap_or_default();
    if !server.eq_ignore_ascii_case(authserv_id.trim()) {
        return false;
    }
    parts.any(|resinfo| {
        let mut words = resinfo.split_whitespace();
        let Some(method) = words.next() else {
            return false;
        };
        let Some((name, result)) = method.split_once('=') else {
            return false;
        };
        if !name.eq_ignore_ascii_case("dkim") || !result.eq_ignore_ascii_case("pass") {
            return false;
        }
        words
            .filter_map(|word| word.split_once('='))
            .any(|(key, value)| {
                key.eq_ignore_ascii_case("header.d") && aligned(&from_domain, value)
            })
    })
}

/// Relaxed alignment: the signing domain is the From domain or a parent of it.
fn aligned(from_domain: &str, signing: &str) -> bool {
    let signing = signing.trim_matches('"').trim().to_ascii_lowercase();
    !signing.is_empty() && (from_domain == signing || from_domain.ends_with(&format!(".{signing}")))
}

/// `text` without RFC 5322 comments (nested parentheses, backslash escapes).
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    let mut escaped = false;
    for c in text.chars() {
        if escaped {
            escaped = false;
            if depth == 0 {
                out.push(c);
            }
            continue;
        }
        match c {
            '\\' => escaped = true,
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "mx.example.org";

    fn check(results: &str, sender: &str) -> bool {
        owner_authenticated(Some(results), ID, sender)
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
        ] {
            assert!(!check(results, "alex@example.org"), "{why}: {results}");
        }
        assert!(!owner_authenticated(None, ID, "alex@example.org"));
        assert!(!owner_authenticated(Some(pass), "", "alex@example.org"));
        assert!(!check(pass, "no-at-sign"));
    }
}
