//! `squidbot doctor` against the real servers: a Matrix access token and password checked
//! against the real Synapse, and email logins checked against the real dovecot and SMTP
//! front end.

use std::process::Output;

use crate::support::bin::{squidbot, stdout};
use crate::support::config::TestConfig;
use crate::support::mail_client::MailServer;
use crate::support::scripted_llm::ScriptedLlm;
use crate::support::testenv;

/// A home whose config is a working setup (the scripted LLM at `url` with a key) and
/// `channel`, the YAML of a channel to check.
fn home_with(url: &str, channel: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    TestConfig::new(url)
        .api_key("test-key")
        .http("127.0.0.1:0", None)
        .extra(channel)
        .write(home.path());
    home
}

/// The Matrix channel at `hs` logging in as `user_id` with `login` (a `key: value` line).
fn matrix(hs: &str, user_id: &str, login: &str) -> String {
    format!(
        "channels:\n  matrix:\n    enabled: true\n    homeserver: \"{hs}\"\n    user_id: \"{user_id}\"\n    {login}\n"
    )
}

/// `squidbot doctor` on `home`.
async fn doctor(home: &std::path::Path) -> Output {
    squidbot(home).arg("doctor").output().await.unwrap()
}

/// The `matrix login` check's line of doctor's output `out`.
fn login_line(out: &str) -> &str {
    out.lines()
        .find(|l| l.contains("matrix login"))
        .unwrap_or_else(|| panic!("no matrix login check:\n{out}"))
}

/// A new account on the test Synapse with `password`: the homeserver's URL, the user id and
/// the registration's access token.
fn register_doctor_account(password: &str) -> (String, String, String) {
    let hs = testenv::var("SQUIDBOT_TEST_MATRIX_URL");
    let dir = testenv::var("SQUIDBOT_TEST_SYNAPSE_DIR");
    let user = format!("doctor{}", fastrand::u64(..));
    let registered = testenv::run_script("synapse.sh", &["register", &dir, &user, password]);
    let registered: serde_json::Value = serde_json::from_str(registered.trim()).unwrap();
    let token = registered["access_token"].as_str().unwrap().to_owned();
    let user_id = registered["user_id"].as_str().unwrap().to_owned();
    (hs, user_id, token)
}

/// `squidbot doctor` on a home whose Matrix channel logs in as `user_id` with `field: value`
/// (`access_token` or `password`).
async fn doctor_matrix(
    llm: &ScriptedLlm,
    hs: &str,
    user_id: &str,
    field: &str,
    value: &str,
) -> Output {
    let login = format!("{field}: \"{value}\"");
    let home = home_with(&llm.url(), &matrix(hs, user_id, &login));
    doctor(home.path()).await
}

#[tokio::test]
async fn matrix_token_is_checked_against_the_real_homeserver() {
    let llm = ScriptedLlm::start().await;
    let (hs, user_id, token) = register_doctor_account("pw-doctor-1");

    for (token, expect_ok) in [(token.as_str(), true), ("syt_not_a_token", false)] {
        let output = doctor_matrix(&llm, &hs, &user_id, "access_token", token).await;
        let out = stdout(&output);
        assert!(
            out.lines()
                .any(|l| l.starts_with("ok  ") && l.contains("matrix homeserver")),
            "{out}"
        );
        let login = login_line(&out);
        if expect_ok {
            assert!(login.starts_with("ok  "), "{out}");
            assert!(output.status.success(), "{out}");
        } else {
            assert!(
                login.starts_with("FAIL") && login.contains("M_UNKNOWN_TOKEN"),
                "{out}"
            );
            assert!(!out.contains("syt_not_a_token"), "a secret leaked: {out}");
            assert_eq!(output.status.code(), Some(1));
        }
    }
}

/// A password is checked by logging in as doctor's own device and out again: a wrong one is a
/// FAIL with the fix, and no device is left on the account either way.
#[tokio::test]
async fn matrix_password_is_checked_and_leaves_no_device() {
    let llm = ScriptedLlm::start().await;
    let (hs, user_id, token) = register_doctor_account("pw-doctor-2");
    for (password, expect_ok) in [("pw-doctor-2", true), ("pw-wrong-42", false)] {
        let output = doctor_matrix(&llm, &hs, &user_id, "password", password).await;
        let out = stdout(&output);
        let login = login_line(&out);
        if expect_ok {
            assert!(login.starts_with("ok  "), "{out}");
        } else {
            assert!(
                login.starts_with("FAIL")
                    && login.contains("M_FORBIDDEN")
                    && login.contains("channels.matrix.password"),
                "{out}"
            );
            assert!(!out.contains(password), "a secret leaked: {out}");
            assert_eq!(output.status.code(), Some(1));
        }
    }
    // A password read from a variable: the fix names the variable's setting (#40).
    let login = "password_env: SQUIDBOT_TEST_MX_PASSWORD";
    let home = home_with(&llm.url(), &matrix(&hs, &user_id, login));
    let output = squidbot(home.path())
        .arg("doctor")
        .env("SQUIDBOT_TEST_MX_PASSWORD", "pw-wrong-43")
        .output()
        .await
        .unwrap();
    let out = stdout(&output);
    let login = login_line(&out);
    assert!(
        login.contains("fix channels.matrix.password_env (the variable SQUIDBOT_TEST_MX_PASSWORD)"),
        "{out}"
    );
    // The account's devices, as the server keeps them: only the one registration made.
    let devices: serde_json::Value = reqwest::Client::new()
        .get(format!("{hs}/_matrix/client/v3/devices"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let devices = devices["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1, "{devices:?}");
}

#[tokio::test]
async fn email_logins_are_checked_against_the_real_mail_server() {
    let llm = ScriptedLlm::start().await;
    let server = MailServer::shared();
    let (address, password) = server.add_user("doctor");
    for (password, expect_ok) in [(password.as_str(), true), ("pw-wrong-secret", false)] {
        let email = format!(
            "channels:\n  email:\n    enabled: true\n    imap_host: {host}\n    imap_port: {imap}\n    smtp_host: {host}\n    smtp_port: {smtp}\n    username: \"{address}\"\n    password: \"{password}\"\n    from_address: \"{address}\"\n    allow_from: [\"owner@localhost\"]\n    tls: false\n",
            host = server.host,
            imap = server.imap_port,
            smtp = server.smtp_port,
        );
        let home = home_with(&llm.url(), &email);
        let output = doctor(home.path()).await;
        let out = stdout(&output);
        for kind in ["email imap login", "email smtp login"] {
            let line = out
                .lines()
                .find(|l| l.contains(kind))
                .unwrap_or_else(|| panic!("no {kind} line: {out}"));
            assert_eq!(line.starts_with("ok  "), expect_ok, "{out}");
        }
        if !expect_ok {
            // The server is named; no empty recipient ("SMTP send to  failed", #40).
            let smtp = out
                .lines()
                .find(|l| l.contains("email smtp login"))
                .unwrap();
            let server = format!("SMTP server {}:{}", server.host, server.smtp_port);
            assert!(
                smtp.contains(&server) && !smtp.contains("send to"),
                "{smtp}"
            );
        }
        assert_eq!(output.status.success(), expect_ok, "{out}");
        assert!(!out.contains("pw-wrong-secret"), "a secret leaked: {out}");
    }
}
