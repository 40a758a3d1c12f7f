//! `squidbot service install|uninstall|status`: the gateway as a systemd service.
//!
//! As root the unit is system-wide (`/etc/systemd/system`, started at boot); otherwise it is a
//! user unit (`~/.config/systemd/user`, `systemctl --user`), which runs while the user is logged
//! in unless lingering is on (`loginctl enable-linger`). `--system` or `--user` choose
//! explicitly. A system unit runs the gateway as the owner of `$SQUIDBOT_HOME` (or
//! `--run-as USER`), never as root. The unit runs this very executable, by its absolute path, with the configuration
//! file and `SQUIDBOT_HOME` this command resolved, so the service sees what `squidbot status`
//! shows; the variables the configuration reads (API keys) come from `$SQUIDBOT_HOME/service.env`,
//! because a service does not inherit the installing shell's environment.
//!
//! Install refuses before writing anything when systemd is not running (`/run/systemd/system`
//! missing, as sd_booted(3) checks); uninstall then still removes the unit. A system unit's
//! user must be able to run the binary: when a directory on its path is closed to that user
//! (`cargo install` as root puts it in /root/.cargo/bin), the binary is copied to
//! /usr/local/bin and the unit runs the copy. The variables the configuration reads that
//! `service.env` lacks are named.
//!
//! `--unit-dir` (`SQUIDBOT_UNIT_DIR`) and `--systemctl` (`SQUIDBOT_SYSTEMCTL`) replace the unit
//! directory and the systemctl program, and the hidden `SQUIDBOT_SYSTEMD_RUN_DIR` and
//! `SQUIDBOT_BIN_DIR` the systemd marker and the copy's directory: the integration tests use
//! them to check the unit and the calls without a running systemd.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use squidbot::config::LoadedConfig;
use squidbot::storage::atomic;

/// The unit's file name, and its name for systemctl.
const UNIT: &str = "squidbot.service";

/// Arguments of `squidbot service`.
#[derive(Debug, Args)]
pub struct ServiceArgs {
    #[command(subcommand)]
    action: Action,
    /// A user unit (`systemctl --user`), even as root.
    #[arg(long, global = true, conflicts_with = "system")]
    user: bool,
    /// A system-wide unit (needs root); the default as root.
    #[arg(long, global = true)]
    system: bool,
    /// Where the unit file goes (default: /etc/systemd/system for a system unit,
    /// $XDG_CONFIG_HOME/systemd/user or ~/.config/systemd/user for a user unit).
    #[arg(long, global = true, env = "SQUIDBOT_UNIT_DIR", value_name = "DIR")]
    unit_dir: Option<PathBuf>,
    /// The user a system unit runs the gateway as (default: the owner of $SQUIDBOT_HOME).
    /// A system unit never runs it as root.
    #[arg(long, global = true, value_name = "USER")]
    run_as: Option<String>,
    /// The systemctl program to run.
    #[arg(
        long,
        global = true,
        env = "SQUIDBOT_SYSTEMCTL",
        value_name = "PROGRAM",
        default_value = "systemctl"
    )]
    systemctl: OsString,
    /// The directory whose presence says systemd runs (as sd_booted(3) checks).
    #[arg(
        long,
        global = true,
        hide = true,
        env = "SQUIDBOT_SYSTEMD_RUN_DIR",
        default_value = "/run/systemd/system"
    )]
    systemd_run_dir: PathBuf,
    /// Where a system unit's binary is copied when the --run-as user cannot run this one.
    #[arg(
        long,
        global = true,
        hide = true,
        env = "SQUIDBOT_BIN_DIR",
        default_value = "/usr/local/bin"
    )]
    bin_dir: PathBuf,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Write the unit, then reload systemd, enable the unit and (re)start it.
    Install,
    /// Stop and disable the unit, remove it, reload systemd.
    Uninstall,
    /// Show where the unit is and what systemctl says about it (its exit code too).
    Status,
}

/// Which systemd instance manages the unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    System,
    User,
}

impl Scope {
    fn of(args: &ServiceArgs) -> Self {
        if args.user {
            Self::User
        } else if args.system || is_root() {
            Self::System
        } else {
            Self::User
        }
    }

    fn unit_dir(self) -> Result<PathBuf> {
        let env = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
        match self {
            Self::System => Ok(PathBuf::from("/etc/systemd/system")),
            Self::User => match (env("XDG_CONFIG_HOME"), env("HOME")) {
                (Some(config), _) => Ok(PathBuf::from(config).join("systemd/user")),
                (None, Some(home)) => Ok(PathBuf::from(home).join(".config/systemd/user")),
                (None, None) => bail!("neither XDG_CONFIG_HOME nor HOME is set; pass --unit-dir"),
            },
        }
    }

    fn wanted_by(self) -> &'static str {
        match self {
            Self::System => "multi-user.target",
            Self::User => "default.target",
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and touches no memory of ours.
    unsafe { libc::geteuid() == 0 }
}

/// Runs systemctl for one scope.
struct Systemctl {
    program: OsString,
    scope: Scope,
}

impl Systemctl {
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.program);
        if self.scope == Scope::User {
            command.arg("--user");
        }
        command.args(args);
        command
    }

    fn shown(&self, args: &[&str]) -> String {
        let scope = if self.scope == Scope::User {
            " --user"
        } else {
            ""
        };
        format!(
            "{}{scope} {}",
            Path::new(&self.program).display(),
            args.join(" ")
        )
    }

    /// Fails clearly, before anything is written, when systemctl cannot be run at all.
    fn check(&self) -> Result<()> {
        let probe = Command::new(&self.program)
            .arg("--version")
            .stdout(Stdio::null())
            .status();
        match probe {
            Ok(_) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => bail!(
                "{} not found: `squidbot service` needs systemd; without it, run `squidbot gateway` under another supervisor",
                Path::new(&self.program).display()
            ),
            Err(error) => Err(error)
                .with_context(|| format!("cannot run {}", Path::new(&self.program).display())),
        }
    }

    fn run(&self, args: &[&str]) -> Result<()> {
        let status = self
            .command(args)
            .status()
            .with_context(|| format!("cannot run `{}`", self.shown(args)))?;
        if !status.success() {
            bail!("`{}` failed ({status})", self.shown(args));
        }
        Ok(())
    }
}

/// Runs the service command.
pub fn run(config_path: Option<&Path>, args: ServiceArgs) -> Result<ExitCode> {
    let scope = Scope::of(&args);
    let dir = match &args.unit_dir {
        Some(dir) => dir.clone(),
        None => scope.unit_dir()?,
    };
    let unit_path = dir.join(UNIT);
    let systemctl = Systemctl {
        program: args.systemctl,
        scope,
    };
    let systemd_runs = args.systemd_run_dir.is_dir();
    match args.action {
        Action::Install => {
            if !systemd_runs {
                bail!(
                    "systemd is not running here ({} is missing), so a unit would never start; nothing was written. Run `squidbot gateway` under the supervisor this system has (a container's restart policy, runit, s6, OpenRC)",
                    args.systemd_run_dir.display()
                );
            }
            install(
                config_path,
                scope,
                args.run_as.as_deref(),
                &unit_path,
                &systemctl,
                &args.bin_dir,
            )
        }
        Action::Uninstall => uninstall(&unit_path, &systemctl, systemd_runs),
        Action::Status => {
            systemctl.check()?;
            let state = if unit_path.exists() {
                "installed"
            } else {
                "not installed"
            };
            say!("unit: {} ({state})", unit_path.display())?;
            let status = systemctl
                .command(&["status", "--no-pager", UNIT])
                .status()
                .with_context(|| format!("cannot run `{}`", systemctl.shown(&["status"])))?;
            // systemctl's own code says it: 0 running, 3 stopped, 4 unknown.
            let code = status.code().unwrap_or(1).clamp(0, 255);
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
        }
    }
}

fn install(
    config_path: Option<&Path>,
    scope: Scope,
    run_as: Option<&str>,
    unit_path: &Path,
    systemctl: &Systemctl,
    bin_dir: &Path,
) -> Result<ExitCode> {
    let loaded = squidbot::config::load(config_path)?;
    if !loaded.exists {
        bail!(
            "no configuration at {}: run `squidbot onboard` first (the gateway cannot start without one)",
            loaded.path.display()
        );
    }
    let exe = std::env::current_exe().context("cannot find the path of this executable")?;
    systemctl.check()?;
    let user = match scope {
        Scope::System => Some(system_user(&loaded.home, run_as)?),
        Scope::User => None,
    };
    // The unit's user must be able to run the binary: `cargo install` as root puts it in
    // /root/.cargo/bin, which no other user can enter.
    let exe = match &user {
        Some(user) => runnable_by(&exe, user, bin_dir)?,
        None => exe,
    };
    let path_env = std::env::var("PATH").ok();
    let unit = render_unit(&loaded, &exe, path_env.as_deref(), scope, user.as_deref())?;
    if let Some(dir) = unit_path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    atomic::write(unit_path, unit.as_bytes())
        .with_context(|| format!("cannot write {}", unit_path.display()))?;
    systemctl.run(&["daemon-reload"])?;
    systemctl.run(&["enable", UNIT])?;
    systemctl.run(&["restart", UNIT])?;
    say!("Installed {} and started it.", unit_path.display())?;
    let env_file = loaded.home.join("service.env");
    say!(
        "Variables the configuration reads (API keys) go in {} as NAME=value lines.",
        env_file.display()
    )?;
    let lacking = super::service_env::missing_variables(&loaded.path, &env_file);
    if !lacking.is_empty() {
        tell!(
            "warning: {} lacks {}, which the configuration reads: add a NAME=value line for each, then `systemctl{} restart squidbot`",
            env_file.display(),
            lacking.join(", "),
            scope_flag(scope)
        );
    }
    say!(
        "Status: squidbot service status; logs: journalctl{} -u squidbot",
        scope_flag(scope)
    )?;
    if scope == Scope::User {
        say!(
            "A user service stops when you log out, unless lingering is on: loginctl enable-linger"
        )?;
    }
    if exe
        .parent()
        .is_some_and(|dir| dir.join(".fingerprint").is_dir())
    {
        tell!(
            "warning: the unit runs {}, a cargo build directory; `cargo install --locked --path .` puts squidbot where a rebuild cannot change it",
            exe.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn uninstall(unit_path: &Path, systemctl: &Systemctl, systemd_runs: bool) -> Result<ExitCode> {
    if systemd_runs {
        systemctl.check()?;
    }
    if !unit_path.exists() {
        say!("{UNIT} is not installed (no {}).", unit_path.display())?;
        return Ok(ExitCode::SUCCESS);
    }
    // Without a running systemd there is nothing to stop or reload, but the unit still goes.
    if !systemd_runs {
        std::fs::remove_file(unit_path)
            .with_context(|| format!("cannot remove {}", unit_path.display()))?;
        say!(
            "Removed {} (systemd is not running, so nothing was stopped or reloaded).",
            unit_path.display()
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    systemctl.run(&["disable", "--now", UNIT])?;
    std::fs::remove_file(unit_path)
        .with_context(|| format!("cannot remove {}", unit_path.display()))?;
    systemctl.run(&["daemon-reload"])?;
    say!("Stopped, disabled and removed {}.", unit_path.display())?;
    Ok(ExitCode::SUCCESS)
}

/// `exe` if `user` can run it, else a copy of it in `bin_dir` (replaced atomically), which
/// `user` can run; refused, saying how, when neither works.
fn runnable_by(exe: &Path, user: &str, bin_dir: &Path) -> Result<PathBuf> {
    let account = super::service_env::Account::lookup(user)?;
    if account.can_execute(exe) {
        return Ok(exe.to_owned());
    }
    let target = bin_dir.join("squidbot");
    let how = format!(
        "copy it yourself (`install -m 0755 {} {}`) and run that copy's `service install`",
        exe.display(),
        target.display()
    );
    if !account.can_execute_dir(bin_dir) {
        bail!(
            "{user} cannot run {} (a directory on its path is closed to it) nor reach {}: {how}",
            exe.display(),
            bin_dir.display()
        );
    }
    let staging = bin_dir.join(format!(".squidbot.{}.tmp", std::process::id()));
    let copied = std::fs::copy(exe, &staging)
        .and_then(|_| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o755))
        })
        .and_then(|()| std::fs::File::open(&staging)?.sync_all())
        .and_then(|()| std::fs::rename(&staging, &target));
    if let Err(error) = copied {
        let _ = std::fs::remove_file(&staging);
        bail!(
            "{user} cannot run {}, and copying it to {} failed ({error}): {how}",
            exe.display(),
            target.display()
        );
    }
    say!(
        "{user} cannot run {} (a directory on its path is closed to it), so the unit runs a copy: {}",
        exe.display(),
        target.display()
    )?;
    Ok(target)
}

/// The user a system unit runs as: `run_as`, else the owner of the home; never root. A
/// gateway running as root would hand the agent's commands every right of the machine that
/// the jail does not take away (an approved `chmod` on any file, for one).
fn system_user(home: &Path, run_as: Option<&str>) -> Result<String> {
    use std::os::unix::fs::MetadataExt;
    if let Some(user) = run_as {
        if user == "root" || user == "0" {
            bail!("--run-as root: a system unit does not run the gateway as root");
        }
        return Ok(user.to_owned());
    }
    let uid = std::fs::metadata(home)
        .with_context(|| format!("cannot read {}", home.display()))?
        .uid();
    if uid == 0 {
        bail!(
            "{} belongs to root, so the gateway would run as root: create a user for it, give it \
             the home (`chown -R squidbot: {}`), and run this again with --run-as squidbot",
            home.display(),
            home.display()
        );
    }
    Ok(uid.to_string())
}

fn scope_flag(scope: Scope) -> &'static str {
    match scope {
        Scope::System => "",
        Scope::User => " --user",
    }
}

/// The unit file. Stopping waits for the gateway's own grace period plus a margin, so running
/// turns finish before systemd kills anything.
fn render_unit(
    loaded: &LoadedConfig,
    exe: &Path,
    path_env: Option<&str>,
    scope: Scope,
    user: Option<&str>,
) -> Result<String> {
    let home = text(&loaded.home)?;
    let mut unit = format!(
        "# Written by `squidbot service install`; `squidbot service uninstall` removes it.\n\
         [Unit]\n\
         Description=squidbot personal AI assistant (gateway)\n\
         After=network-online.target\n\
         Wants=network-online.target\n\
         \n\
         [Service]\n\
         Type=exec\n\
         ExecStart={} gateway --config {}\n\
         Environment={}\n",
        quote(text(exe)?, true)?,
        quote(text(&loaded.path)?, true)?,
        quote(&format!("SQUIDBOT_HOME={home}"), false)?,
    );
    if let Some(user) = user {
        unit.push_str(&format!("User={}\n", escape_specifiers(user)?));
    }
    // The shell tool and skill checks then find the programs the installing shell finds.
    if let Some(path) = path_env {
        unit.push_str(&format!(
            "Environment={}\n",
            quote(&format!("PATH={path}"), false)?
        ));
    }
    let env_file = loaded.home.join("service.env");
    unit.push_str(&format!(
        "EnvironmentFile=-{}\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         TimeoutStopSec={}\n\
         \n\
         [Install]\n\
         WantedBy={}\n",
        escape_specifiers(text(&env_file)?)?,
        loaded.config.gateway.shutdown_grace_seconds + 20,
        scope.wanted_by(),
    ));
    Ok(unit)
}

fn text(path: &Path) -> Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not valid UTF-8", path.display()))
}

/// `value` as one double-quoted word of a unit file: backslashes and quotes escaped, `%`
/// (specifiers) doubled, and in a command line `$` (variable expansion) doubled too.
fn quote(value: &str, command_line: bool) -> Result<String> {
    let mut out = String::from("\"");
    for c in escape_specifiers(value)?.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '$' if command_line => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

/// `%` doubled; a control character (a newline would end the setting) is refused.
fn escape_specifiers(value: &str) -> Result<String> {
    if value.chars().any(char::is_control) {
        bail!("{value:?} contains a control character and cannot go in a unit file");
    }
    Ok(value.replace('%', "%%"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_escapes_what_systemd_would_interpret() {
        assert_eq!(
            quote("/usr/bin/squidbot", true).unwrap(),
            "\"/usr/bin/squidbot\""
        );
        assert_eq!(
            quote(r#"/a b/"c"\d%e$f"#, true).unwrap(),
            r#""/a b/\"c\"\\d%%e$$f""#
        );
        assert_eq!(quote("PATH=$x", false).unwrap(), "\"PATH=$x\"");
        assert!(quote("a\nb", false).is_err());
    }
}
