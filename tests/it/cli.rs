//! The `squidbot` binary as a user runs it: one-shot agent against the scripted LLM, config
//! resolution and errors, status, onboard, and memory across separate processes.

use crate::support::bin::{stderr, stdout};
use crate::support::home::Home;
use std::collections::HashSet;

use crate::harness::{default_reply, summarized_lines};
use crate::support::scripted_llm::{Reply, ScriptedLlm};

#[tokio::test]
async fn one_shot_prints_the_reply_and_exits_zero() {
    let llm = ScriptedLlm::start().await;
    llm.enqueue(Reply::Text("Hello! How can I help?".into()));
    let home = Home::new();
    home.write_config(&llm.url(), "");
    let output = home.run(&["agent", "-m", "hello"]).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Hello! How can I help?\n");
    let history = std::fs::read_to_string(home.path().join("sessions/cli_3Alocal.jsonl")).unwrap();
    assert_eq!(history.lines().count(), 2);
}

#[tokio::test]
async fn config_flag_works_before_and_after_the_subcommand() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    let elsewhere = home.path().join("elsewhere.yaml");
    home.write_config(&llm.url(), "");
    std::fs::rename(home.config(), &elsewhere).unwrap();
    let path = elsewhere.to_str().unwrap();
    for args in [
        vec!["--config", path, "agent", "--message", "a"],
        vec!["agent", "--message", "b", "--config", path],
    ] {
        let output = home.run(&args).await;
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        assert_eq!(stdout(&output), "ok\n");
    }
}

#[tokio::test]
async fn an_unreachable_llm_is_a_clear_error_and_a_failing_exit() {
    let home = Home::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    home.write_config(&format!("http://127.0.0.1:{port}/v1"), "");
    let output = home.run(&["agent", "-m", "hello"]).await;
    assert_eq!(output.status.code(), Some(1));
    // The message names the URL it tried, so a wrong api_base shows. See: #15
    let expected =
        format!("could not reach the LLM at http://127.0.0.1:{port}/v1/chat/completions");
    assert!(stderr(&output).contains(&expected), "{}", stderr(&output));
    assert_eq!(stdout(&output), "");
}

#[tokio::test]
async fn a_missing_config_says_how_to_configure_one() {
    let home = Home::new();
    let output = home.run(&["agent", "-m", "hello"]).await;
    assert!(!output.status.success());
    let text = stderr(&output);
    assert!(text.contains("squidbot onboard"), "{text}");
    assert!(text.contains("squidbot.yaml"), "{text}");
}

#[tokio::test]
async fn an_invalid_config_names_file_line_and_field_before_anything_runs() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    home.write_config(&llm.url(), "agents:\n  consolidation_treshold: 5\n");
    let output = home.run(&["agent", "-m", "hello"]).await;
    assert!(!output.status.success());
    let text = stderr(&output);
    let expected = format!("{}:16", home.config().display());
    assert!(text.contains(&expected), "{text}");
    assert!(text.contains("consolidation_treshold"), "{text}");
    assert_eq!(llm.request_count(), 0, "nothing ran");
    assert!(!home.path().join("sessions").exists());
}

#[tokio::test]
async fn status_prints_the_resolved_configuration() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    home.write_config(&llm.url(), "budgets:\n  daily_tokens: 5000\n");
    let output = home.run(&["status"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for needle in [
        "default",
        "small",
        "scripted-model",
        "consolidation",
        "workspace",
        "sandbox auto",
        "approval ask (refused after 600 s)",
        "per day 5000 tokens and cost no limit; per turn no limit",
    ] {
        assert!(text.contains(needle), "status lacks {needle}:\n{text}");
    }
    assert!(
        !text.contains("test-key"),
        "a secret leaked into status:\n{text}"
    );
    assert!(text.contains("owner:      none named"), "{text}");

    // Who the bot is, its owner, and whom it answers (#40).
    home.write_config(
        &llm.url(),
        "owner:\n  matrix: [\"@alex:example.org\"]\n  email: [alex@example.org]\nchannels:\n  matrix:\n    enabled: true\n    homeserver: https://matrix.example.org\n    user_id: \"@bot:example.org\"\n    access_token: syt_token\n    allowlist: [\"@alex:example.org\", \"@sam:example.org\"]\n",
    );
    let output = home.run(&["status"]).await;
    let text = stdout(&output);
    assert!(output.status.success(), "{text}{}", stderr(&output));
    for line in [
        "bot:        matrix @bot:example.org",
        "owner:      @alex:example.org, alex@example.org",
        "answers:    matrix: @alex:example.org, @sam:example.org (allowlist), in rooms messages that mention it",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
    assert!(!text.contains("syt_token"), "{text}");
}

/// A key variable that is not set stops what needs the key, not what only reads the
/// configuration: status shows it all and names the variable; the agent and doctor name the
/// field and line, and no request reaches the model without its key. See: #40
#[tokio::test]
async fn an_unset_key_variable_stops_the_agent_but_not_status() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    home.write_config(&llm.url(), "");
    let text = std::fs::read_to_string(home.config()).unwrap().replace(
        "api_key: test-key",
        "api_key_env: SQUIDBOT_TEST_KEY_NEVER_SET",
    );
    std::fs::write(home.config(), text).unwrap();
    let expected = ":6: llm.providers.local.api_key_env: environment variable SQUIDBOT_TEST_KEY_NEVER_SET is not set";

    let output = home.run(&["status"]).await;
    let text = stdout(&output);
    assert!(output.status.success(), "{text}{}", stderr(&output));
    assert!(
        text.lines().any(|line| line.starts_with("warning:")
            && line.ends_with(&format!("{expected} (no agent can run)"))),
        "{text}"
    );
    for needle in [
        "llm:        default pool \"default\"",
        "scripted-model",
        "workspace",
    ] {
        assert!(text.contains(needle), "status lacks {needle}:\n{text}");
    }

    let output = home.run(&["agent", "-m", "hello"]).await;
    assert!(!output.status.success());
    assert!(stderr(&output).contains(expected), "{}", stderr(&output));

    let output = home.run(&["doctor"]).await;
    let text = format!("{}{}", stdout(&output), stderr(&output));
    assert!(!output.status.success(), "{text}");
    assert!(
        text.contains("config for the agent") && text.contains(expected),
        "{text}"
    );
    assert!(
        text.contains("not asked: the key of provider \"local\" is missing"),
        "{text}"
    );
    assert_eq!(llm.request_count(), 0, "a request went out without its key");
}

#[tokio::test]
async fn onboard_writes_a_config_that_loads_and_does_not_clobber_it() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    let url = llm.url();
    home.onboard(&url, &["--api-key-env", "SQUIDBOT_TEST_KEY"])
        .await;
    assert!(home.config().exists());
    assert!(home.path().join("workspace").is_dir());
    let first = std::fs::read_to_string(home.config()).unwrap();
    // The config points at a reference the owner has, not at source files (#40).
    assert!(!first.contains("src/"), "{first}");
    assert!(first.contains("squidbot.example.yaml"), "{first}");
    let example = std::fs::read_to_string(home.path().join("squidbot.example.yaml")).unwrap();
    assert!(example.contains("run_as:") && example.contains("shutdown_grace_seconds:"));

    // The same command again is a no-op that succeeds (idempotent), and so is a bare onboard.
    home.onboard(&url, &[]).await;
    let bare = home.run(&["onboard"]).await;
    assert!(bare.status.success(), "{}", stderr(&bare));
    assert_eq!(std::fs::read_to_string(home.config()).unwrap(), first);
    // A deleted template comes back; the config is untouched.
    let agents = home.path().join("workspace/AGENTS.md");
    std::fs::remove_file(&agents).unwrap();
    assert!(home.run(&["onboard"]).await.status.success());
    assert!(agents.exists());

    // Different settings without --force are refused and change nothing.
    let again = home
        .run(&["onboard", "--api-base", "http://other/v1", "--model", "x"])
        .await;
    assert!(
        !again.status.success(),
        "a second onboard with other settings must not overwrite without --force"
    );
    let told = stderr(&again);
    assert!(
        told.contains("--force") && told.contains("scripted-model"),
        "{told}"
    );
    assert_eq!(std::fs::read_to_string(home.config()).unwrap(), first);

    // --force replaces it and keeps the old file beside it.
    let forced = home
        .run(&[
            "onboard",
            "--api-base",
            "http://other/v1",
            "--model",
            "x",
            "--force",
        ])
        .await;
    assert!(forced.status.success(), "{}", stderr(&forced));
    let backup = home.config().with_extension("yaml.bak");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), first);
    assert!(
        std::fs::read_to_string(home.config())
            .unwrap()
            .contains("http://other/v1")
    );
    std::fs::copy(&backup, home.config()).unwrap();

    let status = home.run(&["status"]).await;
    assert!(status.status.success(), "{}", stderr(&status));
}

#[tokio::test]
async fn separate_processes_never_summarize_a_message_twice() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let home = Home::new();
    home.write_config(
        &llm.url(),
        "agents:\n  consolidation_threshold: 4\n  keep_recent: 2\n",
    );
    for i in 0..9 {
        let output = home.run(&["agent", "-m", &format!("m{i}")]).await;
        assert!(output.status.success(), "{}", stderr(&output));
        assert_eq!(stdout(&output), format!("re: m{i}\n"));
    }
    let lines = summarized_lines(&llm.requests());
    assert!(lines.len() >= 5, "consolidations ran: {lines:?}");
    let unique: HashSet<&String> = lines.iter().collect();
    assert_eq!(unique.len(), lines.len(), "summarized twice: {lines:?}");
}

#[tokio::test]
async fn the_example_config_loads() {
    let home = Home::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/example.yaml");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_squidbot"));
    command
        .args(["status", "--config", example])
        .env("SQUIDBOT_HOME", home.path())
        .env("OPENROUTER_API_KEY", "example-key");
    let output = command.output().await.unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("pool default: main (anthropic/claude-sonnet-4"),
        "{text}"
    );
    assert!(!text.contains("example-key"));
}

#[tokio::test]
async fn the_interactive_agent_answers_each_line_and_stops_at_an_exit_word_or_eof() {
    use tokio::io::AsyncWriteExt;
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let home = Home::new();
    home.write_config(&llm.url(), "");
    for (input, replies) in [("one\n\ntwo\nQUIT\nnever\n", 2), ("one\ntwo\nthree\n", 3)] {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_squidbot"))
            .arg("agent")
            .env("SQUIDBOT_HOME", home.path())
            .env("HOME", home.path())
            .env_remove("SQUIDBOT_CONFIG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).await.unwrap();
        drop(stdin); // EOF after the last line, like Ctrl-D.
        let output = child.wait_with_output().await.unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        let text = stdout(&output);
        assert_eq!(text.matches("re: ").count(), replies, "{text}");
        assert!(!text.contains("re: never"), "{text}");
    }
}

#[tokio::test]
async fn a_fresh_sessions_prompt_with_every_tool_on_stays_under_12k_chars() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    home.onboard(&llm.url(), &[]).await;
    let config = std::fs::read_to_string(home.config()).unwrap();
    let tools = "tools:\n  web_search:\n    enabled: true\n    provider: searxng\n    url: http://127.0.0.1:9\n  spawn:\n    enabled: true\n";
    std::fs::write(home.config(), format!("{config}\n{tools}")).unwrap();
    let output = home.run(&["agent", "-m", "hello"]).await;
    assert!(output.status.success(), "{}", stderr(&output));

    let request = &llm.requests()[0];
    let names: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for tool in [
        "shell",
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "fetch_url",
        "web_search",
        "search_history",
        "spawn",
        "spawn_await",
        "cron_list",
        "cron_add",
        "memory_write",
    ] {
        assert!(names.contains(&tool), "{tool} missing from {names:?}");
    }
    let size = request["messages"].to_string().len() + request["tools"].to_string().len();
    println!("prompt size with {} tools: {size} chars", names.len());
    assert!(size <= 12_000, "prompt of {size} chars");
}

/// An answer squidbot cannot use (here a completion without a message) says what was wrong,
/// not only that it "could not read" it (#40).
#[tokio::test]
async fn an_unreadable_answer_says_what_was_wrong() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(|_| Reply::Raw {
        content_type: "application/json".into(),
        body: r#"{"id":"x","object":"chat.completion","choices":[]}"#.into(),
    });
    let home = Home::new();
    home.write_config(&llm.url(), "");
    let output = home.run(&["agent", "-m", "hello"]).await;
    let said = format!("{}{}", stdout(&output), stderr(&output));
    assert!(!output.status.success(), "{said}");
    assert!(said.contains("the completion has no message"), "{said}");
}
