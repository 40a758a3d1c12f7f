//! `squidbot cron` through the real binary: add, list, enable, disable, remove, and the exit
//! codes for invalid schedules, zones, targets and unknown ids, over a temporary home.

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
            "schedule: 0 16 * * *  timezone: Europe/Berlin  channel: matrix:!room:example.org"
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
    for (args, needle) in [
        (
            vec![
                "add",
                "n",
                "m",
                "every 0",
                "--target",
                "email:me@example.org",
            ],
            "invalid schedule",
        ),
        (
            vec![
                "add",
                "n",
                "m",
                "61 * * * *",
                "--target",
                "email:me@example.org",
            ],
            "invalid schedule",
        ),
        (
            vec![
                "add",
                "n",
                "m",
                "0 9 * * *",
                "--target",
                "email:me@example.org",
                "--timezone",
                "Mars/Base",
            ],
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
            stderr(&output).contains("no job found with id \"nope\""),
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
