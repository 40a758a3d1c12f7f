//! The watcher: a process between the daemon and each jailed command that, when the command
//! ends, kills and reaps every process the command started, also those that left its process
//! group with `setsid`.
//!
//! Killing the command's process group (what [`crate::tools::shell`] does for an unconfined
//! command) misses a process that made a new session or group, which then outlived the
//! timeout for good (a lingering `flock`, a loop writing into the workspace). The watcher closes
//! that class with two kernel features the jail already requires, and no second program:
//!
//! - It enters a Landlock domain of its own that scopes signals ([`ruleset`]), then forks the
//!   command, which enters the jail's domain nested inside it. `kill(-1, SIGKILL)` from the
//!   watcher then reaches exactly the processes of the nested domain: every process of this
//!   command, whatever its session or group, and nothing else of the user (not the daemon, not
//!   another command, whose domains are siblings). Signal scoping is ABI 6, the jail's floor.
//!   The command cannot signal the watcher (it sits outside the command's domain).
//! - It is a child subreaper (`PR_SET_CHILD_SUBREAPER`), so a process whose parent died is
//!   reparented to it, not to init. Once the command's shell has ended and the domain is
//!   killed, waiting until `ECHILD` proves that nothing of the command is left.
//!
//! The daemon stops a command early (timeout, cancellation) with `SIGTERM` to the watcher,
//! whose handler kills the domain. The watcher then exits as the command's shell did (its exit
//! code, or its signal), so the daemon reads the command's status from its own child as before.
//!
//! Why not the alternatives: a subreaper daemon would adopt the orphans of every child it has
//! (MCP servers included) and would have to reap pids behind tokio's back, which waits for its
//! own children by pid; a PID namespace needs unprivileged user namespaces, which several
//! distributions disable, and makes the shell's `$$` pid 1, which ignores signals it does not
//! handle.
//!
//! Like the rest of the jail this runs in the child between `fork` and `exec`, and the watcher
//! never execs: it makes system calls only (`fork`, `waitpid`, `kill`, `close_range`,
//! `sigaction`, `_exit`), all async-signal-safe, and allocates nothing.

use std::io;
use std::os::fd::{OwnedFd, RawFd};

use landlock::{CompatLevel, Compatible, Ruleset, RulesetAttr, Scope};

use super::JailUnavailable;

/// The watcher's Landlock ruleset: signals scoped, no access right handled. File and network
/// rights would be inherited by the nested jail (nested domains intersect), so the watcher's
/// domain restricts nothing but where its signals go. Built once; each command's watcher
/// enters a domain of its own from it.
pub fn ruleset() -> Result<OwnedFd, JailUnavailable> {
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(Scope::Signal)
        .and_then(|ruleset| ruleset.create())
        .map_err(JailUnavailable::Watcher)?;
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or(JailUnavailable::WatcherNotEnforced)
}

/// Splits the calling process (the child between `fork` and `exec`, with no new privileges
/// set) into the watcher and the command: enters the watcher's domain from `ruleset` (which
/// must be [`ruleset`]'s), becomes a subreaper, and forks. Returns in the new child, which goes
/// on to enter the jail and exec the command. The watcher never returns: it waits for the
/// command, kills its domain, reaps every process and exits as the command did.
pub fn split(ruleset: RawFd) -> io::Result<()> {
    // SAFETY: landlock_restrict_self takes a descriptor and flags; the descriptor is open in
    // this process (the sandbox holds it for its whole life).
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0 as libc::c_uint) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // `kill(-1)` is only safe under the signal scope: check that it holds before relying on it.
    // The daemon sits outside this new domain, so a scoped process may not even probe it.
    // SAFETY: kill with signal 0 sends nothing; getppid takes nothing.
    if unsafe { libc::kill(libc::getppid(), 0) } == 0 {
        return Err(io::Error::from_raw_os_error(libc::ENOTRECOVERABLE));
    }
    // SAFETY: prctl takes integers only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // Installed before the fork, so a stop that comes at once is not lost; the command's
    // `exec` resets the handler to the default.
    on_signal(libc::SIGTERM, stop as *const () as libc::sighandler_t)?;
    // The daemon's SIGCHLD handler (tokio's) writes to the daemon's signal pipe, which the
    // watcher shares until it closes its descriptors; its children's deaths are its own.
    on_signal(libc::SIGCHLD, libc::SIG_DFL)?;
    // SAFETY: this process has one thread (it is the child of a fork), so fork copies all of
    // it; both sides make system calls only until the command's exec.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(()),
        command => watch(command),
    }
}

/// The `SIGTERM` handler: kills every process of the command's domain.
extern "C" fn stop(_signal: libc::c_int) {
    kill_domain();
}

/// `SIGKILL` to every process this watcher may signal: its nested domain, the command's.
fn kill_domain() {
    // SAFETY: kill takes integers only; Landlock's signal scope confines pid -1 to the
    // processes of this watcher's domain and the domains nested in it.
    unsafe { libc::kill(-1, libc::SIGKILL) };
}

/// The watcher's life: reaps until no child is left, kills the domain as soon as the command's
/// shell has ended, then exits as that shell did.
fn watch(command: libc::pid_t) -> ! {
    // The watcher needs no descriptor of the daemon's, and must not hold the pipe that tells
    // the daemon the command's exec succeeded (it waits for that pipe to close). Standard
    // output and error stay open: the daemon reads to their end, which now comes when the last
    // process of the command is gone.
    // SAFETY: close_range takes integers only.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            0,
        )
    };
    let mut outcome = None;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid writes the status into a local.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == command {
            outcome = Some(status);
        }
        if pid > 0 {
            if outcome.is_some() {
                // Again after each reaped process, in case one forked while dying.
                kill_domain();
            }
            continue;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            // ECHILD: the command and everything it started are gone.
            _ => break,
        }
    }
    exit_as(outcome.unwrap_or(127 << 8))
}

/// Ends the watcher the way `status` (a `waitpid` status) says the command ended: with its
/// exit code, or killed by its signal, so the daemon reports the command's own outcome.
fn exit_as(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        // Only the default action ends a process with this signal's status; a failure leaves
        // the exit code below, which says the same to the reader.
        let _ = on_signal(signal, libc::SIG_DFL);
        // SAFETY: sigset operations write a local; sigprocmask and kill take it and integers.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
        }
        // SAFETY: _exit ends the process without running the daemon's atexit handlers.
        unsafe { libc::_exit(128 + signal) }
    }
    // SAFETY: as above.
    unsafe { libc::_exit(libc::WEXITSTATUS(status)) }
}

/// Sets the action of `signal` to `handler` (a function or `SIG_DFL`).
fn on_signal(signal: libc::c_int, handler: libc::sighandler_t) -> io::Result<()> {
    // SAFETY: the action is a zeroed local with its handler and an empty mask set; sigaction
    // copies it.
    let done = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut())
    };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
