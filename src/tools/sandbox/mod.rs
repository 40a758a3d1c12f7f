//! The shell's jails: what a `shell` command can touch, enforced by the kernel.
//!
//! The allow list ([`crate::tools::shell_policy`]) only predicts whether a command needs the
//! owner; the jail is what holds when the prediction is wrong. Every command runs in one of
//! two jails, built from Landlock (paths, TCP, signals) and seccomp (sockets of every kind,
//! the calls that reach past the process), applied in the child before `exec`:
//!
//! - [`Jail::ReadOnly`], for every command the owner did not approve (allowed ones, and every
//!   command of a heartbeat, cron or sub-agent turn that no grant covers): it reads the system,
//!   the workspace and the skill directories, writes only its own temporary directory (removed
//!   afterwards), opens no socket at all (TCP, UDP, UNIX, netlink), signals nothing outside its
//!   own Landlock domain and gains no privilege.
//! - [`Jail::Workspace`], for an approved command: the same, plus writes in the workspace, plus
//!   sockets when `tools.shell.network` is on.
//!
//! Neither ever reads the rest of `$SQUIDBOT_HOME` (config, sessions, memory, the Matrix store),
//! the config file or the owner's home, nor the daemon's `/proc/<pid>/environ` (the daemon is
//! non-dumpable and commands lose every capability; see [`ruleset::protect_daemon`]). The
//! environment is an allowlist ([`env`]) and each command gets its own TMPDIR.
//!
//! Every process a command starts ends with it, also one that left its process group
//! (`setsid`): a watcher between the daemon and the command kills the command's whole Landlock
//! domain when the command ends or times out ([`watch`]).
//!
//! Fail closed: with `tools.shell.sandbox: auto` and a kernel without Landlock, with a Landlock
//! older than the jail needs ([`ruleset::ABI_FLOOR`], Linux 6.12: below it a command could
//! signal the daemon or truncate what it reads), or a ruleset the kernel cannot fully enforce,
//! commands are refused and status, doctor and the tool's answer name the missing guarantee;
//! only an explicit `sandbox: off` runs them unconfined.
//!
//! - [`rules`]: the paths and rights, computed once at start.
//! - [`ruleset`]: the kernel's ABI and its floor, the Landlock ruleset per command, restricting
//!   the child.
//! - [`seccomp`]: the system call filters, and why they are a deny list.
//! - [`watch`]: the watcher that ends every process of a command.
//! - [`env`]: the command's environment.
//!
//! The jail is applied in the child between `fork` and `exec` (`pre_exec`), from a ruleset and
//! filters the parent built: unit tests can run jailed commands inside the test binary, and no
//! second program (a re-executed launcher) has to be found and trusted.

pub mod env;
pub mod identity;
pub mod rules;
pub mod ruleset;
pub mod seccomp;
#[cfg(test)]
mod tests;
pub mod watch;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::ShellSandbox;
use crate::core::redact::Redactor;

use identity::Identity;
use rules::PathRule;

/// Why a command cannot be sandboxed; it is then not run.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel refused part of the ruleset: it could not be fully enforced.
    #[error("the Landlock ruleset could not be fully enforced: {0}")]
    Ruleset(::landlock::RulesetError),
    /// Landlock created no ruleset although the kernel supports it.
    #[error("Landlock did not create a ruleset")]
    NotEnforced,
    /// The command's temporary directory could not be created.
    #[error("could not create the command's temporary directory: {0}")]
    TempDir(std::io::Error),
    /// The sandbox was found unusable at start (see [`JailUnavailable`]).
    #[error("the shell tool is off, because its jail cannot be built here: {0}")]
    Refused(Arc<JailUnavailable>),
}

/// Why the jail cannot be built on this machine, found once at start: the shell tool is then
/// off, and `/status`, `doctor` and every refused command say this (its Display is the reason
/// the owner reads, so each variant names what is missing and what would bring it).
#[derive(Debug, thiserror::Error)]
pub enum JailUnavailable {
    /// The kernel has no Landlock at all.
    #[error(
        "this kernel has no Landlock (it needs Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK)"
    )]
    NoLandlock,
    /// Landlock is compiled in but not among the active security modules.
    #[error(
        "Landlock is built into this kernel but not enabled (add `landlock` to the `lsm=` boot \
         parameter)"
    )]
    LandlockDisabled,
    /// The kernel's Landlock is older than the jail needs; the reason names each guarantee the
    /// older ABI lacks ([`ruleset::missing_guarantees`]).
    #[error(
        "Landlock ABI {found} < {needed}: {}",
        ruleset::missing_guarantees(*found)
    )]
    AbiBelowFloor {
        /// The ABI the kernel reports.
        found: i32,
        /// The ABI the jail needs ([`ruleset::ABI_FLOOR`]).
        needed: i32,
    },
    /// The Landlock ruleset of the watcher ([`watch::ruleset`]) could not be built.
    #[error("the kernel refused the watcher's Landlock ruleset: {0}")]
    Watcher(::landlock::RulesetError),
    /// Landlock created no ruleset for the watcher although the kernel supports it.
    #[error("Landlock did not create the watcher's ruleset")]
    WatcherNotEnforced,
    /// The seccomp filters could not be compiled for this architecture.
    #[error(transparent)]
    Seccomp(#[from] seccomp::FilterError),
    /// `tools.shell.run_as` names no usable user.
    #[error(transparent)]
    RunAs(#[from] identity::IdentityError),
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
}

impl From<::landlock::RulesetError> for SandboxError {
    fn from(error: ::landlock::RulesetError) -> Self {
        Self::Ruleset(error)
    }
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
    /// `tools.shell.run_as`: who commands run as when the gateway is root.
    pub run_as: Option<String>,
}

/// Which jail a command runs in (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jail {
    /// Not approved by the owner: reads only, writes only its temporary directory, no sockets.
    ReadOnly,
    /// Approved: writes in the workspace too, and the network if `tools.shell.network`.
    Workspace,
}

/// How commands are confined.
#[derive(Debug, Clone)]
enum Confinement {
    /// Landlock at this kernel ABI, with the seccomp filters.
    Landlock {
        abi: i32,
        rules: Vec<PathRule>,
        filters: Arc<seccomp::Filters>,
        /// The watcher's ruleset ([`watch::ruleset`]), open for the sandbox's whole life.
        watch: Arc<OwnedFd>,
        /// The unprivileged user commands run as, when the gateway is root ([`identity`]).
        identity: Option<Identity>,
    },
    /// `tools.shell.sandbox: off`.
    Off,
    /// The jail cannot be built here: commands are refused (the reason says why; shared with
    /// every [`SandboxError::Refused`], as the landlock crate's errors cannot be cloned).
    Refused(Arc<JailUnavailable>),
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
    ruleset: Option<OwnedFd>,
}

impl Prepared {
    /// Whether the command runs under a watcher ([`watch`]): then the process spawned is the
    /// watcher, stopped with `SIGTERM`, never killed outright, so it can end the command.
    pub fn is_watched(&self) -> bool {
        self.ruleset.is_some()
    }
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
            ShellSandbox::Auto => Self::jail(settings),
        };
        // Whatever the mode, commands never read the daemon's environment or memory.
        ruleset::protect_daemon();
        let mut env = env;
        if let Confinement::Landlock { rules, .. } = &confinement {
            env::keep_reachable_path(&mut env, rules);
        }
        Self {
            confinement,
            network: settings.network,
            env,
        }
    }

    /// The jail of `settings`, or why there is none here.
    fn jail(settings: &SandboxSettings) -> Confinement {
        let built = || -> Result<Confinement, JailUnavailable> {
            let abi = ruleset::kernel_abi()?;
            let filters = seccomp::Filters::new()?;
            let identity = Identity::for_commands(settings.run_as.as_deref())?;
            let rules = rules::rules_for(
                rules::SYSTEM_READ,
                &settings.workspace,
                &settings.readable,
                &settings.hidden,
            )?;
            let watch = watch::ruleset()?;
            Ok(Confinement::Landlock {
                abi,
                rules,
                filters: Arc::new(filters),
                watch: Arc::new(watch),
                identity,
            })
        };
        built().unwrap_or_else(|reason| Confinement::Refused(Arc::new(reason)))
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

    /// What `/status` and `doctor` say: `landlock+seccomp (ABI n)`, `off`, or `refused: <why>`
    /// (commands are not run).
    pub fn status(&self) -> String {
        match &self.confinement {
            Confinement::Landlock { abi, identity, .. } => {
                let network = if self.network { "" } else { ", no network" };
                let user = match identity {
                    Some(identity) => format!(", as uid {}", identity.uid),
                    None => String::new(),
                };
                format!("landlock+seccomp (ABI {abi}{network}{user})")
            }
            Confinement::Off => "off".to_owned(),
            Confinement::Refused(reason) => format!("refused: {reason}"),
        }
    }

    /// What to warn about at start, when commands are not run as configured.
    pub fn warning(&self) -> Option<String> {
        match &self.confinement {
            Confinement::Landlock { .. } | Confinement::Off => None,
            Confinement::Refused(reason) => Some(format!(
                "The shell tool is off: its jail cannot be built here ({reason}). Set \
                 tools.shell.sandbox: off to run commands unconfined, with every right of this \
                 user."
            )),
        }
    }

    /// Why commands are refused, when they are.
    pub fn refusal(&self) -> Option<&JailUnavailable> {
        match &self.confinement {
            Confinement::Refused(reason) => Some(reason.as_ref()),
            _ => None,
        }
    }

    /// Whether commands run jailed.
    pub fn is_enforced(&self) -> bool {
        matches!(self.confinement, Confinement::Landlock { .. })
    }

    /// Sets up `command` to run in `jail`: its environment, its own TMPDIR, and (when
    /// enforced) the Landlock ruleset and seccomp filters applied in the child before `exec`.
    /// Keep the result until the command has ended.
    pub fn prepare(
        &self,
        command: &mut tokio::process::Command,
        jail: Jail,
    ) -> Result<Prepared, SandboxError> {
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
            Confinement::Landlock {
                abi,
                rules,
                filters,
                watch,
                identity,
            } => {
                let writable = jail == Jail::Workspace;
                let network = writable && self.network;
                let fd = ruleset::build(*abi, rules, tmp.path(), network, writable)?;
                let raw = fd.as_raw_fd();
                let watch_raw = watch.as_raw_fd();
                let filters = filters.clone();
                let watch = watch.clone();
                let identity = *identity;
                if identity.is_some() {
                    trust_workspace_repositories(command, rules);
                }
                // SAFETY: the closure runs in the forked child before exec and only makes
                // system calls (`restrict_self`: prctl, landlock_restrict_self, fork, seccomp;
                // no allocation). The descriptor stays open in the parent until `Prepared` is
                // dropped, after spawn; the filters and the watcher's ruleset are held through
                // `Arc`s the closure owns.
                unsafe {
                    command.pre_exec(move || {
                        let _watch = &watch;
                        ruleset::restrict_self(
                            raw, watch_raw, &filters, network, !writable, identity,
                        )
                    });
                }
                Some(fd)
            }
            _ => None,
        };
        Ok(Prepared { _tmp: tmp, ruleset })
    }
}

/// Tells git, through its command-line configuration in the environment, that repositories in
/// the workspace are safe although root owns them and the command runs as another user (git
/// refuses such "dubious ownership" otherwise, since 2.35.2): the workspace is the owner's.
/// Only the workspace and its subdirectories are named, never the system's repositories.
fn trust_workspace_repositories(command: &mut tokio::process::Command, rules: &[PathRule]) {
    let Some(workspace) = rules.iter().find(|rule| rule.is_workspace) else {
        return;
    };
    let path = workspace.path.to_string_lossy();
    command
        .env("GIT_CONFIG_COUNT", "2")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", path.as_ref())
        .env("GIT_CONFIG_KEY_1", "safe.directory")
        .env("GIT_CONFIG_VALUE_1", format!("{path}/*"));
}
