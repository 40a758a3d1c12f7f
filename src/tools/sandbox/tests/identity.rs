//! A gateway started as root runs no command as root (#35): commands run as `nobody` (or
//! `tools.shell.run_as`), still read what the daemon wrote with mode 0600 and, when approved,
//! change it, and keep no capability but the mode checks'.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use super::*;

fn is_root() -> bool {
    // SAFETY: geteuid takes nothing.
    unsafe { libc::geteuid() == 0 }
}

/// The `CapEff:` mask of the command's `/proc/self/status`.
fn effective_capabilities(output: &str) -> u64 {
    let line = output
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .unwrap_or_else(|| panic!("no CapEff line in {output}"));
    u64::from_str_radix(line.trim(), 16).unwrap()
}

#[tokio::test]
async fn a_root_gateway_runs_commands_as_an_unprivileged_user() {
    if !is_root() {
        eprintln!("skipped: only a gateway started as root changes the commands' user");
        return;
    }
    let layout = layout();
    let sandbox = sandbox(&layout, false);
    let nobody = identity::Identity::for_commands(None).unwrap().unwrap();
    assert!(
        sandbox
            .status()
            .ends_with(&format!(", as uid {})", nobody.uid)),
        "{}",
        sandbox.status()
    );
    let ws = &layout.workspace;
    // What the daemon writes as root, with the mode every file of its gets (umask 077).
    let notes = ws.join("notes.md");
    std::fs::write(&notes, "written by the daemon\n").unwrap();
    std::fs::set_permissions(&notes, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(ws, std::fs::Permissions::from_mode(0o700)).unwrap();

    for jail in [Jail::ReadOnly, Jail::Workspace] {
        let (ok, output) = jailed(&sandbox, ws, "id -u; id -G; cat notes.md", jail).await;
        assert!(ok, "{jail:?}: {output}");
        let mut lines = output.lines();
        assert_eq!(
            lines.next(),
            Some(nobody.uid.to_string().as_str()),
            "{output}"
        );
        let groups = lines.next().unwrap();
        assert!(
            groups.split(' ').all(|gid| gid != "0"),
            "{jail:?} kept root's group: {output}"
        );
        assert!(output.contains("written by the daemon"), "{output}");
    }

    // Only the mode checks are skipped: no capability that reaches past a file's mode.
    let (ok, status) = jailed(&sandbox, ws, "cat /proc/self/status", Jail::ReadOnly).await;
    assert!(ok, "{status}");
    assert_eq!(
        effective_capabilities(&status),
        identity::Identity::capabilities(true),
        "{status}"
    );
    let (ok, status) = sh(&sandbox, ws, "cat /proc/self/status").await;
    assert!(ok, "{status}");
    assert_eq!(
        effective_capabilities(&status),
        identity::Identity::capabilities(false),
        "{status}"
    );

    // An approved command changes the daemon's file and its mode; what it creates is its own.
    let (ok, output) = sh(
        &sandbox,
        ws,
        "echo appended >> notes.md && chmod 640 notes.md && echo new > made.txt && \
         git init -q . && git add notes.md && git status --short",
    )
    .await;
    assert!(ok, "{output}");
    assert!(
        output.contains("notes.md"),
        "git refused the workspace: {output}"
    );
    assert!(
        std::fs::read_to_string(&notes)
            .unwrap()
            .ends_with("appended\n")
    );
    assert_eq!(
        std::fs::metadata(ws.join("made.txt")).unwrap().uid(),
        nobody.uid
    );

    // The read-only jail still changes nothing, user or not.
    let (ok, output) = jailed(&sandbox, ws, "echo lost >> notes.md", Jail::ReadOnly).await;
    assert!(!ok, "{output}");
    assert!(!std::fs::read_to_string(&notes).unwrap().contains("lost"));

    // A file of root's outside the jail's paths stays out of reach, modes skipped or not.
    let secret = layout.outside.join("root-only");
    std::fs::write(&secret, "root-secret-content").unwrap();
    let (ok, output) = sh(&sandbox, ws, &format!("cat {}", secret.display())).await;
    assert!(!ok && !output.contains("root-secret-content"), "{output}");
}

#[tokio::test]
async fn run_as_names_the_user_and_root_is_refused() {
    if !is_root() {
        eprintln!("skipped: run_as only applies to a gateway started as root");
        return;
    }
    let layout = layout();
    let settings = |run_as: &str| SandboxSettings {
        mode: ShellSandbox::Auto,
        network: false,
        workspace: layout.workspace.clone(),
        readable: Vec::new(),
        hidden: vec![layout.home.clone()],
        env_passthrough: Vec::new(),
        run_as: Some(run_as.to_owned()),
    };
    let chosen = Sandbox::new(&settings("4321"), &Redactor::none());
    let (ok, output) = jailed(&chosen, &layout.workspace, "id -u", Jail::ReadOnly).await;
    assert!(ok, "{output}");
    assert_eq!(output.trim(), "4321");

    let root = Sandbox::new(&settings("root"), &Redactor::none());
    assert!(!root.is_enforced());
    assert!(
        root.status()
            .contains("tools.shell.run_as: \"root\" is root"),
        "{}",
        root.status()
    );
    let refused = run(
        "id -u",
        &layout.workspace,
        Duration::from_secs(5),
        OUTPUT_CAP,
        &root,
        Jail::ReadOnly,
    )
    .await;
    assert!(refused.is_err(), "a command ran with run_as: root");
}
