//! The owner's files are the owner's alone, and an owner is named from the first minute
//! (#23 items 9 and 10): a home made by `onboard` names the owner, its config and everything
//! squidbot writes under the home are unreadable to other users whatever the umask, a home or
//! config left open by something else is narrowed at start, and a channel turned on without an
//! owner is called out by `status` and `doctor`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::bin::stderr;
use crate::support::home::Home;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// Every path under `dir` (and `dir`) that group or others may use, with its mode.
fn open_to_others(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let meta = std::fs::symlink_metadata(dir).unwrap();
    if meta.file_type().is_symlink() {
        return found;
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        found.push(format!("{} {mode:o}", dir.display()));
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            found.extend(open_to_others(&entry.path()));
        }
    }
    found
}

// See: #23 (items 9, 10)
#[tokio::test]
async fn an_onboarded_home_names_the_owner_and_is_private_whatever_the_umask() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    home.onboard(
        &llm.url(),
        &[
            "--owner-matrix",
            "@alex:example.org",
            "--owner-email",
            "alex@example.org",
        ],
    )
    .await;
    let config = std::fs::read_to_string(home.config()).unwrap();
    assert!(
        config.contains("matrix: [\"@alex:example.org\"]"),
        "{config}"
    );
    assert!(config.contains("email: [\"alex@example.org\"]"), "{config}");
    let mode = std::fs::metadata(home.config())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "onboard's config");

    // Something else opened the config; the next start narrows it and the home.
    std::fs::set_permissions(home.config(), std::fs::Permissions::from_mode(0o644)).unwrap();
    llm.enqueue(Reply::Text("hello".to_owned()));
    let output = home.run(&["agent", "-m", "hi"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(home.path().join("sessions").exists());
    assert_eq!(open_to_others(home.path()), Vec::<String>::new());

    // A channel on without its owner is called out.
    let mut config = std::fs::read_to_string(home.config()).unwrap();
    config = config.replace("  matrix: [\"@alex:example.org\"]", "  matrix: []");
    config = config.replacen(
        "  matrix:\n    enabled: false",
        "  matrix:\n    enabled: true\n    homeserver: http://127.0.0.1:9\n    user_id: \"@bot:example.org\"\n    access_token: x\n    allowlist: [\"@alex:example.org\"]",
        1,
    );
    std::fs::write(home.config(), config).unwrap();
    let status = home.run(&["status"]).await;
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&status.stdout),
        stderr(&status)
    );
    assert!(shown.contains("owner.matrix"), "{shown}");
    let doctor = home.run(&["doctor"]).await;
    let shown = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        shown.contains("WARN") && shown.contains("owner.matrix"),
        "{shown}"
    );
}
