//! Sandboxed commands on this machine's kernel, through the shell tool's own `run`.
//!
//! These need a kernel with Landlock (every machine this project builds on has ABI 7); without
//! one they fail rather than pass vacuously.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::tools::shell::{OUTPUT_CAP, Run, run};

mod attacks;
mod identity;
mod reach;

/// A home with a config and a session, its workspace inside, a skill beside, and a directory
/// outside everything.
struct Layout {
    _root: tempfile::TempDir,
    home: PathBuf,
    workspace: PathBuf,
    skills: PathBuf,
    outside: PathBuf,
}

fn layout() -> Layout {
    let root = tempfile::tempdir().unwrap();
    let base = rules::canonical(root.path());
    let home = base.join("home");
    let workspace = home.join("workspace");
    let skills = home.join("skills/bundled/demo");
    let outside = base.join("outside");
    for dir in [&workspace, &skills, &outside, &home.join("sessions")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(home.join("squidbot.yaml"), "api_key: sk-config-secret\n").unwrap();
    std::fs::write(home.join("sessions/cli.jsonl"), "{}\n").unwrap();
    std::fs::write(skills.join("SKILL.md"), "# demo skill\n").unwrap();
    Layout {
        _root: root,
        home,
        workspace,
        skills,
        outside,
    }
}

fn sandbox(layout: &Layout, network: bool) -> Sandbox {
    let settings = SandboxSettings {
        mode: ShellSandbox::Auto,
        network,
        workspace: layout.workspace.clone(),
        readable: vec![layout.home.join("skills/bundled")],
        hidden: vec![layout.home.clone()],
        env_passthrough: Vec::new(),
        run_as: None,
    };
    let sandbox = Sandbox::new(&settings, &Redactor::none());
    assert!(
        sandbox.is_enforced(),
        "this kernel should support Landlock: {}",
        sandbox.status()
    );
    sandbox
}

/// Runs `command` as an approved one (the workspace jail).
async fn sh(sandbox: &Sandbox, cwd: &Path, command: &str) -> (bool, String) {
    jailed(sandbox, cwd, command, Jail::Workspace).await
}

async fn jailed(sandbox: &Sandbox, cwd: &Path, command: &str, jail: Jail) -> (bool, String) {
    let Run { output, status, .. } = run(
        command,
        cwd,
        Duration::from_secs(30),
        OUTPUT_CAP,
        sandbox,
        jail,
    )
    .await
    .unwrap();
    (status.is_some_and(|s| s.success()), output)
}

#[tokio::test]
async fn commands_write_only_in_the_workspace_and_read_only_what_they_may() {
    let layout = layout();
    let sandbox = sandbox(&layout, true);
    assert!(
        sandbox.status().starts_with("landlock+seccomp (ABI "),
        "{}",
        sandbox.status()
    );
    let ws = &layout.workspace;
    let allowed = [
        "echo hi > inside.txt && mkdir -p sub && mv inside.txt sub/ && cat sub/inside.txt"
            .to_owned(),
        "ls /usr/bin > /dev/null && cat /etc/passwd > /dev/null && echo ok".to_owned(),
        format!("cat {}/SKILL.md", layout.skills.display()),
        "echo x > /dev/null && head -c 4 /dev/urandom | wc -c".to_owned(),
        "echo out > /dev/stdout".to_owned(),
        "git init -q repo && cd repo && git status --short && echo git-ok".to_owned(),
        "python3 -c 'import os, json; print(json.dumps(os.listdir(\".\")))'".to_owned(),
    ];
    for command in &allowed {
        let (ok, output) = sh(&sandbox, ws, command).await;
        assert!(ok, "{command}: {output}");
    }
    let denied = [
        format!("cat {}/squidbot.yaml", layout.home.display()),
        "cat ../squidbot.yaml".to_owned(),
        "ls ../sessions".to_owned(),
        format!("echo x > {}/escaped.txt", layout.outside.display()),
        "echo x > ../planted.txt".to_owned(),
        "touch /tmp/squidbot-sandbox-escape".to_owned(),
        format!("ls {}", layout.outside.display()),
        // The daemon's environment, behind Landlock's ptrace rule.
        "cat /proc/$PPID/environ".to_owned(),
        // Signals to anything outside the sandbox (here the test process).
        "kill -0 $PPID".to_owned(),
    ];
    for command in &denied {
        let (ok, output) = sh(&sandbox, ws, command).await;
        assert!(!ok, "{command} should be denied: {output}");
    }
    assert!(!layout.outside.join("escaped.txt").exists());
    assert!(!layout.home.join("planted.txt").exists());
    assert!(!Path::new("/tmp/squidbot-sandbox-escape").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("sub/inside.txt")).unwrap(),
        "hi\n"
    );
}

#[tokio::test]
async fn each_command_gets_its_own_tmpdir_and_a_clean_environment() {
    let layout = layout();
    let sandbox = sandbox(&layout, true);
    let (ok, output) = sh(
        &sandbox,
        &layout.workspace,
        "echo data > \"$TMPDIR/f\" && cat \"$TMPDIR/f\" && echo \"$TMPDIR\" && env | sort",
    )
    .await;
    assert!(ok, "{output}");
    let mut lines = output.lines();
    assert_eq!(lines.next(), Some("data"));
    let tmp = PathBuf::from(lines.next().unwrap());
    assert!(!tmp.exists(), "{} outlived its command", tmp.display());
    let names: Vec<&str> = lines
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .filter(|name| !matches!(*name, "PWD" | "SHLVL" | "_" | "OLDPWD"))
        // A root gateway's commands are told the workspace's repositories are safe (identity).
        .filter(|name| !name.starts_with("GIT_CONFIG_"))
        .collect();
    assert_eq!(
        names,
        ["HOME", "LANG", "PATH", "TERM", "TMPDIR"],
        "{output}"
    );
    assert!(output.contains(&format!("HOME={}", layout.workspace.display())));
}

#[tokio::test]
async fn the_read_only_jail_reads_the_workspace_and_writes_only_its_tmpdir() {
    let layout = layout();
    let sandbox = sandbox(&layout, true);
    let ws = &layout.workspace;
    std::fs::write(ws.join("notes.txt"), "kept\n").unwrap();
    let (ok, output) = jailed(
        &sandbox,
        ws,
        "cat notes.txt && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && ls",
        Jail::ReadOnly,
    )
    .await;
    assert!(ok && output.starts_with("kept\nt\nnotes.txt"), "{output}");
    for command in ["echo x > notes.txt", "touch new", "rm notes.txt", "mkdir d"] {
        let (ok, output) = jailed(&sandbox, ws, command, Jail::ReadOnly).await;
        assert!(!ok, "{command} wrote in the read-only jail: {output}");
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "kept\n"
    );
    assert_eq!(std::fs::read_dir(ws).unwrap().count(), 1);
}

#[tokio::test]
async fn network_false_denies_tcp() {
    let layout = layout();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5); print(\"connected\")'"
    );
    let open = sandbox(&layout, true);
    let (ok, output) = sh(&open, &layout.workspace, &connect).await;
    assert!(ok && output.contains("connected"), "{output}");
    let closed = sandbox(&layout, false);
    assert!(
        closed.status().contains("no network"),
        "{}",
        closed.status()
    );
    let (ok, output) = sh(&closed, &layout.workspace, &connect).await;
    assert!(!ok, "{output}");
    assert!(output.contains("PermissionError"), "{output}");
    // Unapproved, no socket at all even with the network on.
    let (ok, output) = jailed(&open, &layout.workspace, &connect, Jail::ReadOnly).await;
    assert!(!ok && output.contains("PermissionError"), "{output}");
}

#[tokio::test]
async fn an_unenforceable_sandbox_refuses_commands() {
    let layout = layout();
    let settings = SandboxSettings {
        mode: ShellSandbox::Auto,
        network: true,
        workspace: layout.home.clone(),
        readable: Vec::new(),
        hidden: vec![layout.home.join("squidbot.yaml")],
        env_passthrough: Vec::new(),
        run_as: None,
    };
    let sandbox = Sandbox::new(&settings, &Redactor::none());
    assert!(
        sandbox.status().starts_with("refused: "),
        "{}",
        sandbox.status()
    );
    assert!(sandbox.warning().is_some());
    let error = run(
        "touch ran",
        &layout.home,
        Duration::from_secs(5),
        OUTPUT_CAP,
        &sandbox,
        Jail::Workspace,
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("holds"), "{error}");
    assert!(!layout.home.join("ran").exists());

    let off = Sandbox::new(
        &SandboxSettings {
            mode: ShellSandbox::Off,
            ..settings
        },
        &Redactor::none(),
    );
    assert_eq!(off.status(), "off");
    assert!(off.warning().is_none());
}
