//! The shell sandbox: what a `shell` command may touch, enforced by Landlock.
//!
//! Without it a command runs with every right of the daemon's user: it can read
//! `squidbot.yaml` with every secret in it, the Matrix store and every session, and write
//! anywhere. With `tools.shell.sandbox: auto` (the default) and a kernel with Landlock, every
//! command may write only in the workspace and a private temporary directory, read the system,
//! the workspace and the skill directories, and nothing else: not the rest of
//! `$SQUIDBOT_HOME`, not the config file, not the owner's home. It cannot signal the daemon
//! (Landlock ABI 6) nor read its `/proc/<pid>/environ` (the daemon makes itself non-dumpable and
//! the command loses every capability; see [`ruleset::protect_daemon`]), and with
//! `tools.shell.network: false` it cannot open TCP connections or listen (ABI 4). Whatever the
//! mode, its environment is an allowlist ([`env`]) and it gets its own TMPDIR, removed after.
//!
//! - [`rules`]: the paths and rights, computed once at start.
//! - [`ruleset`]: the kernel's ABI, the Landlock ruleset per command, restricting the child.
//! - [`env`]: the command's environment.
//!
//! Landlock is applied in the child between `fork` and `exec` (`pre_exec`), from a ruleset the
//! parent built: unit tests can run sandboxed commands inside the test binary, and no second
//! program (a re-executed launcher) has to be found and trusted. A kernel that has Landlock
//! but cannot enforce the whole ruleset makes the command fail, never run unconfined.

pub mod env;
pub mod rules;
pub mod ruleset;
#[cfg(test)]
mod tests;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::config::ShellSandbox;
use crate::core::redact::Redactor;

use rules::PathRule;

/// Why a command cannot be sandboxed; it is then not run.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The workspace is or holds a path the sandbox must hide, so it cannot be granted.
    #[error(
        "the workspace {} holds {}, which shell commands must not see (squidbot's home, its \
         config or the owner's home); put the workspace inside it, not around it, or set \
         tools.shell.sandbox: off",
        workspace.display(),
        hidden.display()
    )]
    WorkspaceHoldsHidden {
        /// The workspace.
        workspace: PathBuf,
        /// The hidden path inside it.
        hidden: PathBuf,
    },
    /// `tools.shell.network: false` needs TCP rules, which came with Landlock ABI 4.
    #[error(
        "tools.shell.network: false needs Landlock ABI 4 (Linux 6.7) to deny TCP, and this \
         kernel has ABI {abi}; set it to true or use a newer kernel"
    )]
    NetworkUnenforceable {
        /// The kernel's ABI.
        abi: i32,
    },
    /// The kernel refused part of the ruleset: it could not be fully enforced.
    #[error("the Landlock ruleset could not be fully enforced: {0}")]
    Ruleset(#[from] ::landlock::RulesetError),
    /// Landlock created no ruleset although the kernel supports it.
    #[error("Landlock did not create a ruleset")]
    NotEnforced,
    /// The command's temporary directory could not be created.
    #[error("could not create the command's temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
    /// The sandbox was found unusable at start (the reason says why).
    #[error("{0}")]
    Refused(String),
}

/// What a sandbox is made from (see `tools.shell.*`).
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// `tools.shell.sandbox`.
    pub mode: ShellSandbox,
    /// `tools.shell.network`.
    pub network: bool,
    /// The workspace: the commands' working directory, HOME, and only writable tree.
    pub workspace: PathBuf,
    /// Directories commands may read besides the system (the skill directories).
    pub readable: Vec<PathBuf>,
    /// Paths commands must not see even when inside a readable directory: `$SQUIDBOT_HOME`,
    /// the config file, the owner's home.
    pub hidden: Vec<PathBuf>,
    /// `tools.shell.env_passthrough`.
    pub env_passthrough: Vec<String>,
}

/// How commands are confined.
#[derive(Debug, Clone)]
enum Confinement {
    /// Landlock at this kernel ABI.
    Landlock { abi: i32, rules: Vec<PathRule> },
    /// `tools.shell.sandbox: off`.
    Off,
    /// `auto` on a kernel without Landlock: commands run unconfined, with a warning.
    Unavailable(String),
    /// The kernel has Landlock but the configuration cannot be enforced: commands are refused.
    Refused(String),
}

/// The sandbox every `shell` command runs in; built once at start.
#[derive(Debug, Clone)]
pub struct Sandbox {
    confinement: Confinement,
    network: bool,
    env: Vec<(String, String)>,
}

/// What one command's sandbox holds while it runs: its temporary directory (removed when this
/// is dropped) and the ruleset's descriptor (which the child must find open).
#[derive(Debug)]
pub struct Prepared {
    _tmp: tempfile::TempDir,
    _ruleset: Option<OwnedFd>,
}

impl Sandbox {
    /// The sandbox of `settings`, with variables holding one of `redactor`'s secrets kept out
    /// of the commands' environment.
    pub fn new(settings: &SandboxSettings, redactor: &Redactor) -> Self {
        let lookup = |name: &str| std::env::var(name).ok();
        let env = env::child_env(
            &settings.workspace,
            &settings.env_passthrough,
            &lookup,
            redactor,
        );
        let confinement = match settings.mode {
            ShellSandbox::Off => Confinement::Off,
            ShellSandbox::Auto => match ruleset::kernel_abi() {
                Err(reason) => Confinement::Unavailable(reason),
                Ok(abi) if !settings.network && abi < 4 => {
                    Confinement::Refused(SandboxError::NetworkUnenforceable { abi }.to_string())
                }
                Ok(abi) => match rules::rules_for(
                    rules::SYSTEM_READ,
                    &settings.workspace,
                    &settings.readable,
                    &settings.hidden,
                ) {
                    Ok(rules) => {
                        ruleset::protect_daemon();
                        Confinement::Landlock { abi, rules }
                    }
                    Err(error) => Confinement::Refused(error.to_string()),
                },
            },
        };
        Self {
            confinement,
            network: settings.network,
            env,
        }
    }

    /// No confinement, the base environment with HOME at `workspace` (the shell tool's default
    /// until the assembly hands it the configured sandbox).
    pub fn off(workspace: &Path) -> Self {
        let lookup = |name: &str| std::env::var(name).ok();
        Self {
            confinement: Confinement::Off,
            network: true,
            env: env::child_env(workspace, &[], &lookup, &Redactor::none()),
        }
    }

    /// What `/status` and `doctor` say: `landlock (ABI n)`, `off`, `unavailable: <why>` or
    /// `refused: <why>` (commands are not run).
    pub fn status(&self) -> String {
        match &self.confinement {
            Confinement::Landlock { abi, .. } if self.network => format!("landlock (ABI {abi})"),
            Confinement::Landlock { abi, .. } => format!("landlock (ABI {abi}, no network)"),
            Confinement::Off => "off".to_owned(),
            Confinement::Unavailable(reason) => format!("unavailable: {reason}"),
            Confinement::Refused(reason) => format!("refused: {reason}"),
        }
    }

    /// What to warn about at start, when commands are not confined as configured.
    pub fn warning(&self) -> Option<String> {
        match &self.confinement {
            Confinement::Landlock { .. } | Confinement::Off => None,
            Confinement::Unavailable(reason) => Some(format!(
                "Shell commands run unsandboxed, with all the rights of this user: {reason}. \
                 Set tools.shell.sandbox: off to accept that without this warning."
            )),
            Confinement::Refused(reason) => Some(format!("Shell commands are refused: {reason}.")),
        }
    }

    /// Whether commands run under Landlock.
    pub fn is_enforced(&self) -> bool {
        matches!(self.confinement, Confinement::Landlock { .. })
    }

    /// Sets up `command` to run sandboxed: its environment, its own TMPDIR, and (under
    /// Landlock) the ruleset applied in the child before `exec`. Keep the result until the
    /// command has ended.
    pub fn prepare(&self, command: &mut tokio::process::Command) -> Result<Prepared, SandboxError> {
        if let Confinement::Refused(reason) = &self.confinement {
            return Err(SandboxError::Refused(reason.clone()));
        }
        let tmp = tempfile::Builder::new()
            .prefix("squidbot-shell-")
            .tempdir()
            .map_err(SandboxError::TempDir)?;
        command
            .env_clear()
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .env("TMPDIR", tmp.path());
        let ruleset = match &self.confinement {
            Confinement::Landlock { abi, rules } => {
                let fd = ruleset::build(*abi, rules, tmp.path(), self.network)?;
                let raw = fd.as_raw_fd();
                // SAFETY: the closure runs in the forked child before exec and only makes the
                // two system calls of `restrict_self` (async-signal-safe, no allocation). The
                // descriptor stays open in the parent until `Prepared` is dropped, after spawn.
                unsafe {
                    command.pre_exec(move || ruleset::restrict_self(raw));
                }
                Some(fd)
            }
            _ => None,
        };
        Ok(Prepared {
            _tmp: tmp,
            _ruleset: ruleset,
        })
    }
}
