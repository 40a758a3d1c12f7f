//! `squidbot service install|uninstall|status` through the real binary. There is no running
//! systemd here, so the unit directory is a temporary one (`SQUIDBOT_UNIT_DIR`) and systemctl
//! is a script (`SQUIDBOT_SYSTEMCTL`) that records its arguments; the unit written is checked
//! line by line, and the calls in order. `SQUIDBOT_SYSTEMD_RUN_DIR` stands for
//! /run/systemd/system (present: systemd runs) and `SQUIDBOT_BIN_DIR` for /usr/local/bin.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::bin::{stderr, stdout};

/// A home with a configuration, a unit directory and a recording systemctl.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Open to other users, as / and /usr/local/bin are, so a --run-as user can reach bin/.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all(dir.path().join("run-systemd")).unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        let home = dir.path().join("my home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join("squidbot.yaml"),
            "gateway:\n  shutdown_grace_seconds: 7\n",
        )
        .unwrap();
        let log = dir.path().join("systemctl.log");
        // `status` answers 3 (inactive), as systemctl does for a stopped unit.
        let script = format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\ncase \"$*\" in *status*) exit 3;; esac\nexit 0\n",
            log.display()
        );
        let systemctl = dir.path().join("systemctl");
        std::fs::write(&systemctl, script).unwrap();
        std::fs::set_permissions(&systemctl, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { dir }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("my home")
    }

    fn unit(&self) -> PathBuf {
        self.dir.path().join("units/squidbot.service")
    }

    async fn run(&self, args: &[&str], systemctl: &Path) -> Output {
        self.run_with(
            env!("CARGO_BIN_EXE_squidbot").as_ref(),
            args,
            systemctl,
            "run-systemd",
        )
        .await
    }

    /// `exe service ARGS`, with `run_dir` (under the fixture) standing for /run/systemd/system.
    async fn run_with(&self, exe: &Path, args: &[&str], systemctl: &Path, run_dir: &str) -> Output {
        // What `support::bin::squidbot` sets, for another copy of the binary.
        let mut command = tokio::process::Command::new(exe);
        command
            .env("SQUIDBOT_HOME", self.home())
            .env("HOME", self.home())
            .env_remove("SQUIDBOT_CONFIG")
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null())
            .env("SQUIDBOT_SYSTEMD_RUN_DIR", self.dir.path().join(run_dir))
            .env("SQUIDBOT_BIN_DIR", self.dir.path().join("bin"))
            .arg("service")
            .args(args)
            .env("SQUIDBOT_UNIT_DIR", self.dir.path().join("units"))
            .env("SQUIDBOT_SYSTEMCTL", systemctl)
            .output()
            .await
            .unwrap()
    }

    async fn service(&self, args: &[&str]) -> Output {
        self.run(args, &self.dir.path().join("systemctl")).await
    }

    /// The systemctl calls since the last look, one line of arguments each.
    fn calls(&self) -> Vec<String> {
        let log = self.dir.path().join("systemctl.log");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        text.lines().map(str::to_owned).collect()
    }
}

fn is_root() -> bool {
    let output = std::process::Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&output.stdout).trim() == "0"
}

// See: #15
#[tokio::test]
async fn issue_15_service_install_writes_the_unit_enables_it_and_uninstall_removes_it() {
    let fixture = Fixture::new();
    let output = fixture.service(&["install", "--user"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_squidbot")).unwrap();
    let home = fixture.home();
    let unit = std::fs::read_to_string(fixture.unit()).unwrap();
    let lines: Vec<&str> = unit.lines().collect();
    for expected in [
        "[Service]".to_owned(),
        format!(
            "ExecStart=\"{}\" gateway --config \"{}\"",
            exe.display(),
            home.join("squidbot.yaml").display()
        ),
        format!("Environment=\"SQUIDBOT_HOME={}\"", home.display()),
        format!("EnvironmentFile=-{}", home.join("service.env").display()),
        "Restart=on-failure".to_owned(),
        // The gateway's 7 s of grace, plus a margin.
        "TimeoutStopSec=27".to_owned(),
        "[Install]".to_owned(),
        "WantedBy=default.target".to_owned(),
    ] {
        assert!(
            lines.contains(&expected.as_str()),
            "{expected} missing:\n{unit}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("Environment=\"PATH=")),
        "{unit}"
    );
    // systemd's own parser accepts every line (it also checks that ExecStart is executable).
    let verify = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(fixture.unit())
        .output()
        .expect("systemd-analyze (Debian package systemd) runs");
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "{}\n{unit}",
        String::from_utf8_lossy(&verify.stderr)
    );
    assert_eq!(
        fixture.calls(),
        [
            "--version",
            "--user daemon-reload",
            "--user enable squidbot.service",
            "--user restart squidbot.service"
        ]
    );
    // Run from a cargo build directory, it says how to install for real.
    assert!(
        stderr(&output).contains("cargo install"),
        "{}",
        stderr(&output)
    );

    // status: where the unit is, and systemctl's answer and exit code.
    let output = fixture.service(&["status", "--user"]).await;
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("(installed)"),
        "{}",
        stdout(&output)
    );
    assert_eq!(
        fixture.calls(),
        ["--version", "--user status --no-pager squidbot.service"]
    );

    let output = fixture.service(&["uninstall", "--user"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!fixture.unit().exists());
    assert_eq!(
        fixture.calls(),
        [
            "--version",
            "--user disable --now squidbot.service",
            "--user daemon-reload"
        ]
    );
}

// See: #15
#[tokio::test]
async fn issue_15_service_scope_is_system_as_root_else_user_unless_chosen() {
    let default_is_user = !is_root();
    for (flag, user) in [
        (Some("--system"), false),
        (Some("--user"), true),
        (None, default_is_user),
    ] {
        let fixture = Fixture::new();
        let args: Vec<&str> = ["install", "--run-as", "nobody"]
            .into_iter()
            .chain(flag)
            .collect();
        let output = fixture.service(&args).await;
        assert!(output.status.success(), "{flag:?}: {}", stderr(&output));
        let prefix = if user { "--user " } else { "" };
        assert_eq!(
            fixture.calls()[1..],
            [
                format!("{prefix}daemon-reload"),
                format!("{prefix}enable squidbot.service"),
                format!("{prefix}restart squidbot.service")
            ],
            "{flag:?}"
        );
        let target = if user {
            "WantedBy=default.target"
        } else {
            "WantedBy=multi-user.target"
        };
        let unit = std::fs::read_to_string(fixture.unit()).unwrap();
        assert!(unit.lines().any(|line| line == target), "{flag:?}: {unit}");
        // A system unit never runs the gateway as root.
        assert_eq!(
            unit.lines().any(|line| line == "User=nobody"),
            !user,
            "{flag:?}: {unit}"
        );
    }
}

// See: #23 (item 10)
#[tokio::test]
async fn a_system_unit_never_runs_the_gateway_as_root() {
    let fixture = Fixture::new();
    if !is_root() {
        // The home belongs to this user, who is then the unit's user.
        let output = fixture.service(&["install", "--system"]).await;
        assert!(output.status.success(), "{}", stderr(&output));
        let unit = std::fs::read_to_string(fixture.unit()).unwrap();
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(fixture.home()).unwrap());
        assert!(
            unit.lines().any(|line| line == format!("User={uid}")),
            "{unit}"
        );
        return;
    }
    // As root, with a home root owns and no --run-as: refused, nothing written or called.
    let output = fixture.service(&["install", "--system"]).await;
    assert!(!output.status.success());
    assert!(stderr(&output).contains("--run-as"), "{}", stderr(&output));
    assert!(!fixture.unit().exists());
    assert_eq!(fixture.calls(), ["--version"], "nothing enabled or started");
    let output = fixture
        .service(&["install", "--system", "--run-as", "root"])
        .await;
    assert!(!output.status.success());
    assert!(!fixture.unit().exists());
}

// See: #15
#[tokio::test]
async fn issue_15_a_missing_systemctl_is_a_clear_error_and_nothing_is_written() {
    let fixture = Fixture::new();
    let missing = fixture.dir.path().join("no-such-systemctl");
    for action in ["install", "uninstall", "status"] {
        let output = fixture.run(&[action], &missing).await;
        assert_eq!(output.status.code(), Some(1), "{action}");
        let text = stderr(&output);
        assert!(
            text.contains("no-such-systemctl not found") && text.contains("needs systemd"),
            "{action}: {text}"
        );
    }
    assert!(!fixture.unit().exists());
}

// See: #15
#[tokio::test]
async fn issue_15_service_install_without_a_configuration_says_to_onboard_first() {
    let fixture = Fixture::new();
    std::fs::remove_file(fixture.home().join("squidbot.yaml")).unwrap();
    let output = fixture.service(&["install"]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("squidbot onboard"),
        "{}",
        stderr(&output)
    );
    assert!(!fixture.unit().exists());
    assert!(fixture.calls().is_empty());
}

/// The program of the unit's `ExecStart="…" gateway …` line.
fn exec_start(unit: &str) -> PathBuf {
    let line = unit
        .lines()
        .find_map(|line| line.strip_prefix("ExecStart=\""))
        .unwrap_or_else(|| panic!("no ExecStart:\n{unit}"));
    PathBuf::from(&line[..line.find('"').unwrap()])
}

/// Runs `program --version` as nobody, as systemd would run the unit's `User=nobody`.
/// (runuser, not setpriv: on this kernel setpriv was seen to run a program in a directory
/// closed to nobody, which `sh` and runuser as nobody could not.)
fn version_as_nobody(program: &Path) -> std::process::Output {
    std::process::Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .arg(program)
        .arg("--version")
        .output()
        .expect("runuser (util-linux) runs")
}

// See: #40
#[tokio::test]
async fn as_root_the_unit_runs_a_binary_its_user_can_execute_and_names_missing_variables() {
    if !is_root() {
        // Only root installs a unit for another user (CI runs these tests as root).
        return;
    }
    let fixture = Fixture::new();
    std::fs::write(
        fixture.home().join("squidbot.yaml"),
        "gateway:\n  shutdown_grace_seconds: 7\n  http:\n    token_env: SQUIDBOT_TEST_TOKEN\n",
    )
    .unwrap();
    // As `cargo install` leaves it for root: in a directory no one else may enter.
    let closed = fixture.dir.path().join("root/.cargo/bin");
    std::fs::create_dir_all(&closed).unwrap();
    std::fs::set_permissions(
        fixture.dir.path().join("root"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    let installed = closed.join("squidbot");
    std::fs::copy(env!("CARGO_BIN_EXE_squidbot"), &installed).unwrap();
    assert!(
        !version_as_nobody(&installed).status.success(),
        "nobody must not be able to run the root-only copy, or this test proves nothing"
    );
    let systemctl = fixture.dir.path().join("systemctl");
    let args = ["install", "--system", "--run-as", "nobody"];
    let output = fixture
        .run_with(&installed, &args, &systemctl, "run-systemd")
        .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let unit = std::fs::read_to_string(fixture.unit()).unwrap();
    let program = exec_start(&unit);
    assert_eq!(program, fixture.dir.path().join("bin/squidbot"), "{unit}");
    let ran = version_as_nobody(&program);
    assert!(
        ran.status.success() && String::from_utf8_lossy(&ran.stdout).contains("squidbot"),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(
        stdout(&output).contains("runs a copy"),
        "{}",
        stdout(&output)
    );
    // The variable the configuration reads is named, since service.env lacks it.
    assert!(
        stderr(&output).contains("lacks SQUIDBOT_TEST_TOKEN"),
        "{}",
        stderr(&output)
    );
    std::fs::write(
        fixture.home().join("service.env"),
        "SQUIDBOT_TEST_TOKEN=x\n",
    )
    .unwrap();
    let output = fixture
        .run_with(&installed, &args, &systemctl, "run-systemd")
        .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stderr(&output).contains("lacks"), "{}", stderr(&output));

    // A binary nobody can already run is used where it is.
    let output = fixture.service(&args).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let unit = std::fs::read_to_string(fixture.unit()).unwrap();
    assert_eq!(
        exec_start(&unit),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_squidbot")).unwrap()
    );
}

// See: #40
#[tokio::test]
async fn without_systemd_install_writes_nothing_and_uninstall_still_removes_the_unit() {
    let fixture = Fixture::new();
    let systemctl = fixture.dir.path().join("systemctl");
    let exe: &Path = env!("CARGO_BIN_EXE_squidbot").as_ref();
    let output = fixture
        .run_with(exe, &["install", "--user"], &systemctl, "no-systemd")
        .await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("systemd is not running")
            && stderr(&output).contains("nothing was written"),
        "{}",
        stderr(&output)
    );
    assert!(!fixture.unit().exists());
    assert!(!fixture.dir.path().join("units").exists());
    assert!(fixture.calls().is_empty());

    // A unit left from when systemd ran is removed all the same.
    std::fs::create_dir_all(fixture.dir.path().join("units")).unwrap();
    std::fs::write(fixture.unit(), "[Service]\n").unwrap();
    let output = fixture
        .run_with(exe, &["uninstall", "--user"], &systemctl, "no-systemd")
        .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!fixture.unit().exists());
    assert!(
        stdout(&output).contains("systemd is not running"),
        "{}",
        stdout(&output)
    );
    assert!(fixture.calls().is_empty());
}
