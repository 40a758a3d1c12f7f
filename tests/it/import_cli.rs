//! `squidbot import DIR` through the binary: an original (Python) home with history across
//! channels, a malformed line, cron jobs, MEMORY.md and config.json is brought over; a second
//! run changes nothing; the written YAML loads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use squidbot::core::ports::store::HistoryStore;
use squidbot::core::session::SessionId;
use squidbot::storage::JsonlStore;

const HISTORY: &str = r#"{"role":"user","content":"hi","timestamp":"2026-02-24T10:00:00.000001","channel":"cli","sender_id":"local"}
{"role":"assistant","content":"hello","timestamp":"2026-02-24T10:00:01","channel":"cli","sender_id":"assistant"}
{"role":"user","content":"matrix question","timestamp":"2026-02-24T10:01:00","channel":"matrix","sender_id":"@bob:example.org"}
{"role":"assistant","content":"matrix answer","timestamp":"2026-02-24T10:01:01","channel":"matrix","sender_id":"assistant"}
{not json
{"role":"user","content":"mail","timestamp":"2026-02-24T10:02:00","channel":"email","sender_id":"Alice@Example.COM"}
{"role":"assistant","content":null,"timestamp":"2026-02-24T10:02:01","tool_calls":[{"id":"c1","name":"shell","arguments":{"command":"ls"}}],"channel":"email","sender_id":"assistant"}
{"role":"tool","content":"file.txt","timestamp":"2026-02-24T10:02:02","tool_call_id":"c1","channel":"email","sender_id":"assistant"}
{"role":"assistant","content":"mail answer","timestamp":"2026-02-24T10:02:03","channel":"email","sender_id":"assistant"}
{"role":"user","content":"again","timestamp":"2026-02-24T10:03:00","channel":"cli","sender_id":"local"}
{"role":"assistant","content":"again answer","timestamp":"2026-02-24T10:03:01","channel":"cli","sender_id":"assistant"}
"#;

const JOBS: &str = r#"[
  {"id": "ab12cd34", "name": "standup", "message": "Remind me of standup", "schedule": "0 9 * * 1-5",
   "channel": "matrix:@bob:example.org", "enabled": true, "timezone": "Europe/Berlin",
   "last_run": null, "metadata": {"matrix_room_id": "!room:example.org"}},
  {"id": "ef56ab78", "name": "ping", "message": "ping", "schedule": "every 3600"}
]"#;

const CONFIG: &str = r#"{
  "llm": {
    "default_pool": "default",
    "providers": {"openrouter": {"api_base": "https://openrouter.ai/api/v1", "api_key": "sk-test", "supports_reasoning_content": false}},
    "models": {"opus": {"provider": "openrouter", "model": "anthropic/claude-opus-4-5", "max_tokens": 8192, "max_context_tokens": 100000},
               "small": {"provider": "openrouter", "model": "qwen/qwen3-8b", "max_tokens": 8192, "max_context_tokens": 100000}},
    "pools": {"default": [{"model": "opus"}, {"model": "small"}], "cheap": [{"model": "small"}]}
  },
  "agents": {"workspace": "~/.squidbot/workspace", "history_context_messages": 80,
             "heartbeat": {"enabled": false, "interval_minutes": 30, "active_hours_start": "00:00", "active_hours_end": "24:00", "timezone": "local", "pool": "cheap"}},
  "tools": {"files": {"enabled": true}},
  "channels": {"matrix": {"enabled": false, "homeserver": "https://matrix.org", "user_id": "", "access_token": "", "device_id": "SQUIDBOT01", "room_ids": [], "group_policy": "mention", "allowlist": []}}
}"#;

fn original_home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fill_original(dir.path());
    dir
}

/// Writes an original home's files into `root`.
fn fill_original(root: &Path) {
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(root.join("history.jsonl"), HISTORY).unwrap();
    std::fs::create_dir_all(root.join("workspace")).unwrap();
    std::fs::write(root.join("workspace/MEMORY.md"), "- likes tea\n").unwrap();
    std::fs::create_dir_all(root.join("cron")).unwrap();
    std::fs::write(root.join("cron/jobs.json"), JOBS).unwrap();
    std::fs::write(root.join("config.json"), CONFIG).unwrap();
}

async fn import(home: &Path, source: &Path) -> Output {
    import_as(home, source, home).await
}

/// `squidbot import source` into `home` for a user whose `$HOME` is `user`.
async fn import_as(home: &Path, source: &Path, user: &Path) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_squidbot"))
        .arg("import")
        .arg(source)
        .env("SQUIDBOT_HOME", home)
        .env("HOME", user)
        .env_remove("SQUIDBOT_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap()
}

/// The standard output of an import that must have succeeded.
fn succeeded(output: Output) -> String {
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

async fn contents(home: &Path, session: &str) -> Vec<String> {
    let store = JsonlStore::new(home);
    let tail = store
        .load_tail(&SessionId::parse(session).unwrap())
        .await
        .unwrap();
    assert_eq!(tail.skipped_lines, 0);
    tail.messages
        .iter()
        .map(|m| m.message.content.clone())
        .collect()
}

#[tokio::test]
async fn an_original_home_is_imported_once_and_loads() {
    let source = original_home();
    let home = tempfile::tempdir().unwrap();
    let out = succeeded(import(home.path(), source.path()).await);
    assert!(
        out.contains("10 messages into 3 sessions, 1 malformed lines skipped"),
        "{out}"
    );
    assert!(out.contains("jobs:     2 added"), "{out}");

    assert_eq!(
        contents(home.path(), "cli:local").await,
        ["hi", "hello", "again", "again answer"]
    );
    assert_eq!(
        contents(home.path(), "matrix:@bob:example.org").await,
        ["matrix question", "matrix answer"]
    );
    assert_eq!(
        contents(home.path(), "email:alice@example.com").await,
        ["mail", "", "file.txt", "mail answer"]
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("workspace/MEMORY.md")).unwrap(),
        "- likes tea\n"
    );
    let jobs = squidbot::cron::store::CronJobs::new(home.path())
        .load()
        .await
        .unwrap();
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["ab12cd34", "ef56ab78"]);
    assert_eq!(jobs[0].metadata["matrix_room_id"], "!room:example.org");

    let loaded = squidbot::config::load(Some(&home.path().join("squidbot.yaml"))).unwrap();
    let pool: Vec<&str> = loaded
        .config
        .pool_members("default")
        .unwrap()
        .iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(pool, ["opus", "small"]);
    assert_eq!(
        loaded.config.llm.providers["openrouter"].api_key.expose(),
        "sk-test"
    );

    let before = snapshot(home.path());
    let again = import(home.path(), source.path()).await;
    let again_out = String::from_utf8_lossy(&again.stdout).into_owned();
    assert!(again.status.success(), "{again_out}");
    assert!(again_out.contains("already imported"), "{again_out}");
    assert_eq!(
        snapshot(home.path()),
        before,
        "a second import changed files"
    );
}

#[tokio::test]
async fn existing_memory_and_config_are_kept() {
    let source = original_home();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("workspace")).unwrap();
    std::fs::write(home.path().join("workspace/MEMORY.md"), "- ours\n").unwrap();
    let ours_config = "llm:\n  default_pool: default\n";
    std::fs::write(home.path().join("squidbot.yaml"), ours_config).unwrap();
    let output = import(home.path(), source.path()).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("workspace/MEMORY.md")).unwrap(),
        "- ours\n"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("workspace/MEMORY.md.imported")).unwrap(),
        "- likes tea\n"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("squidbot.yaml")).unwrap(),
        ours_config
    );
    squidbot::config::load(Some(&home.path().join("squidbot.imported.yaml"))).unwrap();
    let before = snapshot(home.path());
    let again = import(home.path(), source.path()).await;
    assert!(again.status.success());
    assert_eq!(snapshot(home.path()), before);
}

/// The original's config names `agents.workspace: "~/.squidbot/workspace"`; whether the home
/// imported is that very `~/.squidbot` or a copy of it elsewhere, the import writes nothing
/// outside the new home and the imported config keeps the agent inside it.
// See: #15
#[tokio::test]
async fn issue_15_an_import_writes_nothing_outside_its_home() {
    for copied in [true, false] {
        let user = tempfile::tempdir().unwrap();
        let copy = tempfile::tempdir().unwrap();
        let source = if copied {
            copy.path().to_owned()
        } else {
            user.path().join(".squidbot")
        };
        fill_original(&source);
        let home = tempfile::tempdir().unwrap();
        let (user_before, source_before) = (snapshot(user.path()), snapshot(&source));

        let out = succeeded(import_as(home.path(), &source, user.path()).await);
        assert_eq!(
            snapshot(user.path()),
            user_before,
            "copied: {copied}; {out}"
        );
        assert_eq!(snapshot(&source), source_before, "copied: {copied}; {out}");
        assert!(out.contains("moved agents.workspace"), "{out}");
        assert_eq!(
            std::fs::read_to_string(home.path().join("workspace/MEMORY.md")).unwrap(),
            "- likes tea\n"
        );
        let path = home.path().join("squidbot.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let loaded = squidbot::config::load_from_str(&text, &path, home.path()).unwrap();
        assert_eq!(
            loaded.config.agents.workspace,
            home.path().join("workspace"),
            "copied: {copied}"
        );
    }
}
