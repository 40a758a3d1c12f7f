//! `squidbot cron` through the real binary: add, list, enable, disable, remove, and the exit
//! codes for invalid schedules, zones, targets and unknown ids, over a temporary home; the
//! README's own example verbatim, the default target (the owner's own conversation), and jobs
//! named by name.

use crate::support::bin::{squidbot, stderr, stdout};
use std::path::Path;
use std::process::Output;

async fn cron(home: &Path, args: &[&str]) -> Output {
    squidbot(home)
        .arg("cron")
        .args(args)
        .output()
        .await
        .unwrap()
}

fn jobs(home: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(home.join("cron/jobs.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn add_list_disable_enable_remove() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let output = cron(home, &["list"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "No cron jobs configured.\n");

    let output = cron(
        home,
        &[
            "add",
            "tea",
            "Remind me of tea",
            "0 16 * * *",
            "--target",
            "matrix:!room:example.org",
            "--timezone",
            "Europe/Berlin",
        ],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("Added cron job 'tea' (id="),
        "{}",
        stdout(&output)
    );
    let saved = jobs(home);
    let id = saved[0]["id"].as_str().unwrap().to_owned();
    // A Matrix job added from the shell knows its room, so the gateway can deliver it.
    assert_eq!(saved[0]["metadata"]["matrix_room_id"], "!room:example.org");
    assert_eq!(saved[0]["timezone"], "Europe/Berlin");

    let output = cron(home, &["list"]).await;
    let listing = stdout(&output);
    assert!(listing.contains(&format!("[on] {id}  tea")), "{listing}");
    assert!(
        listing.contains(
            // Quoted as a shell takes it back (`!` is history expansion in bash).
            "schedule: 0 16 * * *  timezone: Europe/Berlin  target: 'matrix:!room:example.org'"
        ),
        "{listing}"
    );

    let output = cron(home, &["disable", &id]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(jobs(home)[0]["enabled"], false);
    assert!(stdout(&cron(home, &["list"]).await).contains(&format!("[off] {id}")));
    let output = cron(home, &["enable", &id]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(jobs(home)[0]["enabled"], true);

    let output = cron(home, &["remove", &id]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), format!("Removed job '{id}'\n"));
    assert!(jobs(home).is_empty());
}

#[tokio::test]
async fn invalid_input_exits_2_and_unknown_ids_fail() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    // `cron add n m SCHEDULE` for a mail target, then `more`.
    let add = |schedule: &'static str, more: &[&'static str]| {
        let mut args = vec![
            "add",
            "n",
            "m",
            schedule,
            "--target",
            "email:me@example.org",
        ];
        args.extend(more);
        args
    };
    for (args, needle) in [
        (add("every 0", &[]), "invalid schedule"),
        (add("61 * * * *", &[]), "invalid schedule"),
        (
            add("0 9 * * *", &["--timezone", "Mars/Base"]),
            "unknown timezone",
        ),
        (vec!["add", "n", "m", "every 60"], "--target"),
        (
            vec!["add", "n", "m", "every 60", "--target", "cli:local"],
            "terminal",
        ),
    ] {
        let output = cron(home, &args).await;
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(needle),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    assert!(!home.join("cron/jobs.json").exists());
    for verb in ["remove", "enable", "disable"] {
        let output = cron(home, &[verb, "nope"]).await;
        assert_eq!(output.status.code(), Some(1), "{verb}");
        assert!(
            stderr(&output).contains("no job found with id or name \"nope\""),
            "{}",
            stderr(&output)
        );
    }
}

#[tokio::test]
async fn a_corrupt_jobs_file_is_reported_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    std::fs::create_dir_all(home.join("cron")).unwrap();
    std::fs::write(home.join("cron/jobs.json"), "not json").unwrap();
    let output = cron(
        home,
        &[
            "add",
            "n",
            "m",
            "every 60",
            "--target",
            "email:me@example.org",
        ],
    )
    .await;
    assert!(!output.status.success());
    assert!(stderr(&output).contains("jobs.json"), "{}", stderr(&output));
    assert_eq!(
        std::fs::read_to_string(home.join("cron/jobs.json")).unwrap(),
        "not json"
    );
}

/// A configuration with the channels given on (`matrix`, `email`), the owner named on each.
fn configure(home: &Path, matrix: bool, email: bool) {
    let config = format!(
        "owner:\n  matrix: [\"@alex:example.org\"]\n  email: [\"Alex@Example.org\"]\n\
         channels:\n  matrix:\n    enabled: {matrix}\n    homeserver: https://matrix.example.org\n\
         \x20   user_id: \"@bot:example.org\"\n    access_token: t\n\
         \x20 email:\n    enabled: {email}\n    imap_host: imap.example.org\n    smtp_host: smtp.example.org\n\
         \x20   username: bot\n    password: p\n    from_address: bot@example.org\n"
    );
    std::fs::write(home.join("squidbot.yaml"), config).unwrap();
}

/// A stored Matrix conversation in which `sender` wrote at `at`.
fn matrix_history(home: &Path, room_stem: &str, sender: &str, at: &str) {
    std::fs::create_dir_all(home.join("sessions")).unwrap();
    let line = serde_json::json!({
        "role": "user", "content": "hello", "timestamp": at, "sender_id": sender
    });
    let path = home.join(format!(
        "sessions/matrix_3A_21{room_stem}_3Aexample.org.jsonl"
    ));
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    text.push_str(&format!("{line}\n"));
    std::fs::write(path, text).unwrap();
}

/// The README's `squidbot cron add …` example, split as a shell would (double quotes only,
/// which is all it uses).
fn readme_cron_example() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("`squidbot cron add ")
        .expect("README shows `squidbot cron add`");
    let rest = &readme[start + 1..];
    let command = &rest[..rest.find('`').unwrap()];
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in command.chars() {
        match c {
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    words.push(word);
    assert_eq!(words[..3], ["squidbot", "cron", "add"], "{command}");
    words.split_off(1)
}

// See: #40
#[tokio::test]
async fn the_readmes_cron_example_runs_verbatim_and_targets_the_owners_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    configure(home, true, true);
    // The owner wrote in two rooms; the newer is their conversation. Someone else's newer
    // message elsewhere does not count.
    matrix_history(
        home,
        "old",
        "@alex:example.org",
        "2026-01-01T10:00:00+00:00",
    );
    matrix_history(home, "dm", "@alex:example.org", "2026-01-02T10:00:00+01:00");
    matrix_history(
        home,
        "other",
        "@eve:example.org",
        "2026-01-03T10:00:00+00:00",
    );
    let args = readme_cron_example();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = cron(home, &args[1..]).await;
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    // Matrix is preferred over email, and the output says so, in a form to paste back.
    assert!(
        stdout(&output).contains("your Matrix conversation")
            && stdout(&output).contains("--target 'matrix:!dm:example.org'"),
        "{}",
        stdout(&output)
    );
    let saved = jobs(home);
    assert_eq!(saved[0]["channel"], "matrix:!dm:example.org");
    assert_eq!(saved[0]["metadata"]["matrix_room_id"], "!dm:example.org");
    let listing = stdout(&cron(home, &["list"]).await);
    assert!(
        listing.contains("target: 'matrix:!dm:example.org'"),
        "{listing}"
    );
    let status = crate::support::bin::squidbot(home)
        .arg("status")
        .output()
        .await
        .unwrap();
    assert!(
        stdout(&status).contains("cron:       default target --target 'matrix:!dm:example.org'"),
        "{}",
        stdout(&status)
    );

    // Email only: the owner's address, as the email channel names its sessions.
    let dir = tempfile::tempdir().unwrap();
    configure(dir.path(), false, true);
    let output = cron(dir.path(), &args[1..]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("--target email:alex@example.org"),
        "{}",
        stdout(&output)
    );
    assert_eq!(jobs(dir.path())[0]["channel"], "email:alex@example.org");

    // Matrix only, before the owner ever wrote: refused, saying what to do.
    let dir = tempfile::tempdir().unwrap();
    configure(dir.path(), true, false);
    let output = cron(dir.path(), &args[1..]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("write to the bot once") && stderr(&output).contains("--target"),
        "{}",
        stderr(&output)
    );
}

// See: #40
#[tokio::test]
async fn jobs_are_named_by_name_wherever_an_id_works_and_a_shared_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    for name in ["tea", "backup", "backup"] {
        let output = cron(
            home,
            &[
                "add",
                name,
                "m",
                "every 60",
                "--target",
                "email:me@example.org",
            ],
        )
        .await;
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let output = cron(home, &["disable", "tea"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let tea = jobs(home).into_iter().find(|j| j["name"] == "tea").unwrap();
    assert_eq!(tea["enabled"], false);
    let output = cron(home, &["enable", "tea"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(jobs(home)[0]["enabled"], true);

    // Two jobs named backup: refused, naming both ids, and nothing changes.
    let ids: Vec<String> = jobs(home)[1..]
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    for verb in ["remove", "disable"] {
        let output = cron(home, &[verb, "backup"]).await;
        assert_eq!(output.status.code(), Some(1), "{verb}");
        let text = stderr(&output);
        assert!(
            text.contains("several jobs are named \"backup\"")
                && ids.iter().all(|id| text.contains(id.as_str())),
            "{text}"
        );
    }
    assert_eq!(jobs(home).len(), 3);
    assert!(jobs(home).iter().all(|j| j["enabled"] == true));

    let output = cron(home, &["remove", "tea"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(jobs(home).len(), 2);
    assert!(jobs(home).iter().all(|j| j["name"] == "backup"));
    // An id still picks one of the two.
    let output = cron(home, &["remove", &ids[0]]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(jobs(home).len(), 1);
    // Now the name is unique again.
    let output = cron(home, &["remove", "backup"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(jobs(home).is_empty());
}
