//! Unit tests of MIME parsing on literal mails.

use std::path::PathBuf;

use super::parse::*;

fn mail(text: &str) -> ParsedMail {
    parse(text.replace('\n', "\r\n").as_bytes(), 1000).unwrap()
}

#[test]
fn plain_mail_gives_sender_subject_ids_and_text() {
    let parsed = mail(
        "From: Alice <Alice@Example.org>\nTo: bot@example.org\nSubject: Hello\n\
         Message-ID: <m1@example.org>\nIn-Reply-To: <m0@example.org>\n\
         References: <a@x> <m0@example.org>\n\nHi there\n",
    );
    assert_eq!(parsed.facts.sender.as_deref(), Some("alice@example.org"));
    assert_eq!(parsed.facts.message_id.as_deref(), Some("m1@example.org"));
    assert_eq!(parsed.subject, "Hello");
    assert_eq!(parsed.in_reply_to, vec!["m0@example.org"]);
    assert_eq!(parsed.references, vec!["a@x", "m0@example.org"]);
    assert_eq!(parsed.body, "Hi there");
}

#[test]
fn alternative_prefers_plain_and_html_only_becomes_text() {
    let alt = mail(
        "From: a@x\nSubject: s\nContent-Type: multipart/alternative; boundary=b\n\n--b\n\
         Content-Type: text/plain\n\nplain words\n--b\nContent-Type: text/html\n\n\
         <p>html words</p>\n--b--\n",
    );
    assert_eq!(alt.body, "plain words");
    let html = mail(
        "From: a@x\nSubject: s\nContent-Type: text/html; charset=utf-8\n\n\
         <html><body><h1>Title</h1><p>Some <b>bold</b> text</p></body></html>\n",
    );
    assert!(html.body.contains("Title"), "{}", html.body);
    assert!(html.body.contains("Some **bold** text"), "{}", html.body);
    assert!(!html.body.contains('<'), "{}", html.body);
}

#[test]
fn legacy_charsets_are_decoded() {
    let raw = b"From: a@x\r\nSubject: =?ISO-8859-1?Q?Gr=FC=DFe?=\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: 8bit\r\n\r\nSch\xf6ne Gr\xfc\xdfe\r\n";
    let parsed = parse(raw, 1000).unwrap();
    assert_eq!(parsed.subject, "Grüße");
    assert_eq!(parsed.body, "Schöne Grüße");
}

#[test]
fn signed_mail_keeps_the_text_and_drops_the_signature_part() {
    let parsed = mail(
        "From: a@x\nSubject: s\nContent-Type: multipart/signed; protocol=\"application/pgp-signature\"; \
         micalg=pgp-sha256; boundary=b\n\n--b\nContent-Type: text/plain\n\nsigned words\n--b\n\
         Content-Type: application/pgp-signature; name=signature.asc\n\n-----BEGIN PGP SIGNATURE-----\n\
         xyz\n-----END PGP SIGNATURE-----\n--b--\n",
    );
    assert_eq!(parsed.body, "signed words");
    assert_eq!(parsed.signature, Some("pgp"));
    assert!(parsed.attachments.is_empty());
}

#[test]
fn attachments_are_kept_or_skipped_by_size() {
    let big = "QUJD".repeat(400);
    let parsed = mail(&format!(
        "From: a@x\nSubject: s\nContent-Type: multipart/mixed; boundary=b\n\n--b\n\
         Content-Type: text/plain\n\nsee attached\n--b\nContent-Type: text/csv; name=data.csv\n\
         Content-Disposition: attachment; filename=data.csv\n\na,b\n1,2\n--b\n\
         Content-Type: application/octet-stream\nContent-Disposition: attachment; filename=big.bin\n\
         Content-Transfer-Encoding: base64\n\n{big}\n--b--\n"
    ));
    assert_eq!(parsed.body, "see attached");
    assert_eq!(parsed.attachments.len(), 1);
    assert_eq!(parsed.attachments[0].name, "data.csv");
    assert_eq!(parsed.attachments[0].mime, "text/csv");
    assert!(String::from_utf8_lossy(&parsed.attachments[0].bytes).contains("1,2"));
    assert_eq!(
        parsed.skipped,
        vec![("big.bin".into(), "application/octet-stream".into(), 1200)]
    );
    let saved = vec![(
        "data.csv".to_owned(),
        "text/csv".to_owned(),
        8,
        PathBuf::from("/w/attachments/email/d/data.csv"),
    )];
    let text = agent_text(&parsed, &saved, &[], 1000);
    assert!(text.starts_with("Subject: s\n\nsee attached"), "{text}");
    assert!(
        text.contains("saved at /w/attachments/email/d/data.csv"),
        "{text}"
    );
    assert!(
        text.contains("big.bin (application/octet-stream, 1200 bytes) is over the 1000-byte limit"),
        "{text}"
    );
}

#[test]
fn automation_headers_are_read() {
    let parsed = mail(
        "From: a@x\nReturn-Path: <>\nAuto-Submitted: auto-replied\nPrecedence: bulk\n\
         List-Id: <list.example.org>\nSubject: s\n\nbody\n",
    );
    assert_eq!(parsed.facts.auto_submitted.as_deref(), Some("auto-replied"));
    assert_eq!(parsed.facts.precedence.as_deref(), Some("bulk"));
    assert!(parsed.facts.list_id);
    assert!(parsed.facts.null_return_path);
}

#[test]
fn mail_without_text_says_so() {
    assert_eq!(
        mail("From: a@x\nSubject: s\n\n").body,
        "[This mail has no text.]"
    );
}

/// Issue 35: every `Authentication-Results` is kept, topmost first (mail-parser's `header_raw`
/// gives the bottom-most), and a second From or a foreign Sender is seen.
#[test]
fn every_verdict_is_kept_in_order_and_a_second_from_is_seen() {
    use super::auth::Identity;
    let parsed = mail(
        "Authentication-Results: mx.example.org; dkim=none\n\
         Received: from x by mx.example.org\n\
         Authentication-Results: mx.example.org;\n dkim=pass header.d=example.org\n\
         From: alex@example.org\nSubject: s\n\nhi\n",
    );
    assert_eq!(
        parsed.facts.auth_results,
        vec![
            "mx.example.org; dkim=none".to_owned(),
            "mx.example.org;\r\n dkim=pass header.d=example.org".to_owned()
        ]
    );
    assert_eq!(parsed.facts.identity, Identity::Single);
    for (headers, identity) in [
        (
            "From: eve@evil.net\nFrom: alex@example.org\n",
            Identity::SeveralFrom,
        ),
        (
            "From: alex@example.org, eve@evil.net\n",
            Identity::SeveralFrom,
        ),
        (
            "From: alex@example.org\nSender: eve@evil.net\n",
            Identity::OtherSender,
        ),
        (
            "From: alex@example.org\nSender: Alex <ALEX@example.org>\n",
            Identity::Single,
        ),
    ] {
        let parsed = mail(&format!("{headers}Subject: s\n\nhi\n"));
        assert_eq!(parsed.facts.identity, identity, "{headers}");
    }
}
