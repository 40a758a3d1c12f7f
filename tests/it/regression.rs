//! Regressions of reported issues, each test named `issue_N_…` after its issue, run against
//! the real binary (and the scripted LLM over real HTTP where the fault involves it).
//!
//! #15: a gateway that could not be stopped once its log reader was gone, output that panicked
//! on a closed pipe, errors that misled (404s, unreachable URLs, one schema error at a time,
//! indentation errors at the wrong line, causes said twice, a literal `./~` without HOME), and
//! small traps (the key prompt, `token_env` failing every command, colours in pipes).

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;

use crate::support::bin::{squidbot, stderr, stdout};
use crate::support::daemon::{Gateway, TOKEN};
use crate::support::home::Home;
use crate::support::scripted_llm::ScriptedLlm;

/// A non-interactive onboard of a local endpoint without a key.
const ONBOARD: [&str; 5] = [
    "onboard",
    "--api-base",
    "http://127.0.0.1:9/v1",
    "--model",
    "m",
];

/// A pseudo-terminal: the binary gets the `terminal` side, the test reads and writes `master`.
struct Pty {
    master: File,
    terminal: OwnedFd,
}

impl Pty {
    fn open() -> Self {
        let (mut master, mut terminal) = (-1, -1);
        // SAFETY: openpty writes two new descriptors into the integers it is given and reads
        // nothing else (the name, termios and size pointers may be null).
        let status = unsafe {
            libc::openpty(
                &mut master,
                &mut terminal,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(status, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened by openpty and are owned by nothing else.
        unsafe {
            Self {
                master: File::from_raw_fd(master),
                terminal: OwnedFd::from_raw_fd(terminal),
            }
        }
    }

    /// The terminal side, for a child's stdin, stdout or stderr.
    fn stdio(&self) -> Stdio {
        Stdio::from(self.terminal.try_clone().unwrap())
    }

    /// Everything written to the terminal, once every process holding it has exited (the read
    /// ends with EIO when the last terminal side is closed).
    fn read_all(self) -> String {
        let Pty {
            mut master,
            terminal,
        } = self;
        drop(terminal);
        let mut bytes = Vec::new();
        let mut buffer = [0u8; 4096];
        while let Ok(n @ 1..) = master.read(&mut buffer) {
            bytes.extend_from_slice(&buffer[..n]);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Runs `squidbot status` on the test config (14 lines) plus `extra`, which must fail; returns
/// the config's path and what the binary said on stderr.
async fn status_refuses(extra: &str) -> (String, String) {
    let home = Home::new();
    home.write_config("http://127.0.0.1:9/v1", extra);
    let output = home.run(&["status"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    (home.config().display().to_string(), stderr(&output))
}

/// With its log reader gone (`squidbot gateway 2>&1 | tail`, then Ctrl-C), the gateway panicked
/// while logging the shutdown, in the task that starts it, and SIGTERM did nothing more.
/// See: #15
#[tokio::test]
async fn issue_15_a_gateway_whose_log_reader_died_still_stops_on_sigterm() {
    let llm = ScriptedLlm::start().await;
    let (log_reader, log_writer) = std::io::pipe().unwrap();
    let env = [("RUST_LOG", "info")];
    let mut gateway =
        Gateway::start_logging_to(&llm.url(), Some(TOKEN), "", &env, log_writer.into()).await;
    drop(log_reader);
    // Within the grace period (10 s) plus a margin: `terminate` waits 15 s at most.
    assert_eq!(gateway.terminate().await, Some(0));
}

/// `squidbot onboard … | head -3` panicked on the closed pipe. See: #15
#[tokio::test]
async fn issue_15_output_to_a_closed_pipe_is_dropped_and_the_command_finishes() {
    let home = Home::new();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    // Spawned by hand: tokio's `output()` would replace the closed pipe with its own.
    let output = squidbot(home.path())
        .args(ONBOARD)
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
        .wait_with_output()
        .await
        .unwrap();
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(home.config().exists());
    assert!(home.path().join("workspace/SOUL.md").exists());
}

/// An `api_base` without `/v1` got "HTTP 404. Try again later". See: #15
#[tokio::test]
async fn issue_15_an_api_base_without_v1_says_the_endpoint_was_not_found() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    let without_v1 = llm.url().trim_end_matches("/v1").to_owned();
    home.write_config(&without_v1, "");
    let output = home.run(&["agent", "-m", "hello"]).await;
    assert_eq!(output.status.code(), Some(1));
    let told = stderr(&output);
    let url = format!("{without_v1}/chat/completions");
    assert!(told.contains("endpoint was not found"), "{told}");
    assert!(told.contains(&url) && told.contains("api_base"), "{told}");
    assert!(!told.contains("Try again later"), "{told}");
}

/// Deserialization stopped at the first unknown field or wrong type. See: #15
#[tokio::test]
async fn issue_15_every_schema_error_is_reported_at_once() {
    let extra = "agents:\n  keep_recnt: 5\n  summary_word_limit: many\ngateway:\n  http: {listen: \"127.0.0.1:1\", tokn: x}\n";
    let (path, told) = status_refuses(extra).await;
    for expected in [
        format!("{path}:16: agents.keep_recnt: unknown field, did you mean keep_recent?"),
        format!("{path}:17: agents.summary_word_limit: expected a whole number"),
        format!("{path}:19: gateway.http.tokn: unknown field, did you mean token?"),
    ] {
        assert!(told.contains(&expected), "{expected}\nnot in:\n{told}");
    }
}

/// A line indented too far made the deserializer fail on the value above it ("invalid boolean"
/// for `enabled`), so the error named that line and field. See: #15
#[tokio::test]
async fn issue_15_an_indentation_error_names_its_own_line_and_key() {
    let extra = "agents:\n  heartbeat:\n    enabled: false\n      interval_minutes: 5\n";
    let (path, told) = status_refuses(extra).await;
    let expected = format!("{path}:18: interval_minutes: ");
    assert!(told.contains(&expected), "{told}");
    assert!(told.contains("indented"), "{told}");
    assert!(!told.contains("enabled"), "{told}");
}

/// anyhow's `{:#}` repeated causes the library error had already said. See: #15
#[tokio::test]
async fn issue_15_a_cause_is_said_once() {
    let home = Home::new();
    let file = home.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let output = squidbot(home.path())
        .env("SQUIDBOT_HOME", file.join("home"))
        .arg("status")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let told = stderr(&output);
    assert_eq!(told.matches("Not a directory").count(), 1, "{told}");
}

/// Without HOME, `~/.squidbot` was taken literally: onboard created `./~/.squidbot`. See: #15
#[tokio::test]
async fn issue_15_without_home_nothing_is_created_under_a_literal_tilde() {
    let cwd = tempfile::tempdir().unwrap();
    let output = squidbot(cwd.path())
        .env_remove("HOME")
        .env_remove("SQUIDBOT_HOME")
        .current_dir(cwd.path())
        .args(ONBOARD)
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(!cwd.path().join("~").exists());
    let told = stderr(&output);
    assert!(
        told.contains("HOME is not set") && told.contains("SQUIDBOT_HOME"),
        "{told}"
    );
}

/// The wizard said "(empty for none)" for the key variable while Enter picked
/// `OPENAI_API_KEY`. See: #15
#[tokio::test]
async fn issue_15_the_key_prompt_does_what_it_says() {
    let cases = [
        // A local server: nothing offered, Enter means no key.
        ("http://127.0.0.1:9/v1", "\n", None),
        // OpenAI: its usual variable is offered and Enter takes it; `-` means none.
        ("https://api.openai.com/v1", "\n", Some("OPENAI_API_KEY")),
        ("https://api.openai.com/v1", "-\n", None),
    ];
    for (api_base, key_answer, expected) in cases {
        let home = Home::new();
        let pty = Pty::open();
        let child = squidbot(home.path())
            .arg("onboard")
            .env("OPENAI_API_KEY", "sk-test")
            .stdin(pty.stdio())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Then no Matrix id and no mail address for the owner.
        let answers = format!("{api_base}\nm\n{key_answer}\n\n");
        std::io::Write::write_all(&mut &pty.master, answers.as_bytes()).unwrap();
        let output = child.wait_with_output().await.unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        let config = std::fs::read_to_string(home.config()).unwrap();
        let key_line = config
            .lines()
            .find(|line| line.trim_start().starts_with("api_key"))
            .unwrap_or_default()
            .trim();
        let wanted = match expected {
            Some(name) => format!("api_key_env: {name} "),
            None => "api_key: \"\" ".to_owned(),
        };
        assert!(
            key_line.starts_with(&wanted),
            "{api_base} {key_answer:?}: {key_line}\n{}",
            stdout(&output)
        );
    }
}

/// An unset `gateway.http.token_env` made every command fail; only the gateway needs it.
/// See: #15
#[tokio::test]
async fn issue_15_an_unset_token_variable_stops_only_the_gateway() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    let extra = "gateway:\n  http:\n    token_env: SQUIDBOT_UNSET_TOKEN\n";
    home.write_config(&llm.url(), extra);
    for args in [&["status"][..], &["cron", "list"], &["agent", "-m", "hi"]] {
        let output = home.run(args).await;
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    }
    let status = stdout(&home.run(&["status"]).await);
    assert!(status.contains("SQUIDBOT_UNSET_TOKEN"), "{status}");
    let output = home.run(&["gateway"]).await;
    assert_eq!(output.status.code(), Some(1));
    let expected = format!(
        "{}:17: gateway.http.token_env: environment variable SQUIDBOT_UNSET_TOKEN is not set",
        home.config().display()
    );
    assert!(stderr(&output).contains(&expected), "{}", stderr(&output));
}

/// Logs carried ANSI colours into files, pipes and journald. See: #15
#[tokio::test]
async fn issue_15_logs_are_coloured_only_on_a_terminal_without_no_color() {
    const ESC: char = '\u{1b}';
    let llm = ScriptedLlm::start().await;
    let env = [("RUST_LOG", "info")];
    let mut piped = Gateway::start_with_token(&llm.url(), None, "", &env).await;
    assert_eq!(piped.terminate().await, Some(0));
    let mut log = String::new();
    let mut pipe = piped.child.stderr.take().unwrap();
    tokio::io::AsyncReadExt::read_to_string(&mut pipe, &mut log)
        .await
        .unwrap();
    assert!(log.contains("Gateway starting."), "{log}");
    assert!(!log.contains(ESC), "{log:?}");

    for (no_color, coloured) in [("", true), ("1", false)] {
        let pty = Pty::open();
        let env = [("RUST_LOG", "info"), ("NO_COLOR", no_color)];
        let mut gateway = Gateway::start_logging_to(&llm.url(), None, "", &env, pty.stdio()).await;
        assert_eq!(gateway.terminate().await, Some(0));
        drop(gateway);
        let log = pty.read_all();
        assert!(log.contains("Gateway starting."), "{log}");
        assert_eq!(
            log.contains(ESC),
            coloured,
            "NO_COLOR={no_color:?}: {log:?}"
        );
    }
}
