//! The test servers `scripts/testenv/up` starts are there and answer, so a channel suite that
//! fails points at the channel, not at a missing server.

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use crate::support::testenv;

#[tokio::test]
async fn synapse_answers_the_client_api() {
    let url = testenv::var("SQUIDBOT_TEST_MATRIX_URL");
    let versions: serde_json::Value = reqwest::get(format!("{url}/_matrix/client/versions"))
        .await
        .expect("GET /versions")
        .json()
        .await
        .expect("versions JSON");
    assert!(
        versions["versions"]
            .as_array()
            .is_some_and(|v| !v.is_empty()),
        "{versions}"
    );
    let dir = testenv::var("SQUIDBOT_TEST_SYNAPSE_DIR");
    let env = testenv::run_script("synapse.sh", &["env", &dir]);
    assert!(
        env.contains(&format!("SQUIDBOT_TEST_MATRIX_URL={url}")),
        "{env}"
    );
}

#[test]
fn imap_greets_with_idle_and_smtp_greets() {
    let host = testenv::var("SQUIDBOT_TEST_MAIL_HOST");
    let greeting = |port: String| {
        let mut stream = TcpStream::connect(format!("{host}:{port}")).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut buf = [0u8; 512];
        let n = stream.read(&mut buf).expect("read greeting");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let imap = greeting(testenv::var("SQUIDBOT_TEST_IMAP_PORT"));
    assert!(imap.starts_with("* OK") && imap.contains("IDLE"), "{imap}");
    let smtp = greeting(testenv::var("SQUIDBOT_TEST_SMTP_PORT"));
    assert!(smtp.starts_with("220"), "{smtp}");
    let dir = std::path::PathBuf::from(testenv::var("SQUIDBOT_TEST_MAIL_DIR"));
    assert!(dir.join("users").exists(), "{}", dir.display());
    assert!(testenv::scripts_dir().join("mail.sh").exists());
    assert_ne!(crate::support::free_port(), 0);
}
