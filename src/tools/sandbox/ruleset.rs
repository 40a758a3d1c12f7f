//! Landlock: the kernel's ABI, the ruleset of one command, and restricting the child.
//!
//! The ruleset is built in the parent with the `landlock` crate at [`CompatLevel::HardRequirement`]
//! for every access right of the kernel's ABI (up to [`TESTED_ABI`]): if the kernel cannot
//! enforce any part of it, building fails and the command is not run, instead of running under
//! a silently weaker sandbox. The child, between `fork` and `exec`, only makes two system calls
//! on the ready ruleset's file descriptor (`prctl(PR_SET_NO_NEW_PRIVS)` and
//! `landlock_restrict_self`): both are async-signal-safe and allocate nothing, which is all a
//! forked child of a multi-threaded process may do.

use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::path::Path;

use landlock::{
    ABI, Access as _, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};

use super::identity::Identity;
use super::rules::{Access, PathRule};
use super::seccomp::Filters;
use super::{JailUnavailable, SandboxError};

/// The newest ABI whose rights this module grants and denies knowingly (file system rights of
/// ABI 5, TCP of ABI 4, signal and abstract-socket scopes of ABI 6). Newer kernels are used at
/// this ABI; ABI 7 adds audit flags only.
pub const TESTED_ABI: i32 = 6;

/// The oldest ABI the jail runs commands on: the newest of [`GUARANTEES`]. Below it, with
/// `tools.shell.sandbox: auto`, the shell is refused. A jail that silently loses a guarantee
/// on an older kernel fails open in exactly the ways an attacker looks for (`kill $PPID`,
/// `truncate -s 0` on a readable file), and the owner reading "ABI 4" in `/status` cannot know
/// which; so the floor is one number here, and the reason names what would be missing.
pub const ABI_FLOOR: i32 = 6;

/// One guarantee of the jail that needs a Landlock ABI: below `abi` the jail is not built.
struct Guarantee {
    /// The ABI that brings it.
    abi: i32,
    /// What a command could do without it.
    open: &'static str,
    /// What brings it, for the owner deciding on a kernel.
    needs: &'static str,
}

/// What each ABI up to [`ABI_FLOOR`] adds that the jail relies on, the gravest first (a reason
/// names them in this order). TCP rights (ABI 4) are not among them: the seccomp socket filter
/// already refuses every socket without network.
const GUARANTEES: [Guarantee; 3] = [
    Guarantee {
        abi: ABI_FLOOR,
        open: "commands could signal the daemon and other processes and reach abstract UNIX \
               sockets outside the jail",
        needs: "signal and socket scoping need Linux 6.12",
    },
    Guarantee {
        abi: 3,
        open: "commands could truncate any file they can read",
        needs: "truncation control needs Linux 6.2",
    },
    Guarantee {
        abi: 5,
        open: "commands could send ioctls to the devices they may open",
        needs: "device ioctl control needs Linux 6.10",
    },
];

/// `LANDLOCK_CREATE_RULESET_VERSION`: asks `landlock_create_ruleset` for the ABI version.
const CREATE_RULESET_VERSION: libc::c_uint = 1;

/// The kernel's Landlock ABI version when it is at least [`ABI_FLOOR`], or why the jail cannot
/// be built: no Landlock, or an older ABI ([`JailUnavailable::AbiBelowFloor`], whose reason
/// reads `Landlock ABI 4 < 6: commands could signal the daemon …`).
pub fn kernel_abi() -> Result<i32, JailUnavailable> {
    floor(landlock_abi()?)
}

/// `abi` when it brings every guarantee of [`GUARANTEES`], else the refusal carrying it.
fn floor(abi: i32) -> Result<i32, JailUnavailable> {
    if GUARANTEES.iter().all(|guarantee| abi >= guarantee.abi) {
        Ok(abi)
    } else {
        Err(JailUnavailable::AbiBelowFloor {
            found: abi,
            needed: ABI_FLOOR,
        })
    }
}

/// What a jail at `abi` would lack: each guarantee of [`GUARANTEES`] it does not bring, what a
/// command could do without it and what brings it, the gravest first, joined by `; `.
pub fn missing_guarantees(abi: i32) -> String {
    let missing: Vec<String> = GUARANTEES
        .iter()
        .filter(|guarantee| abi < guarantee.abi)
        .map(|guarantee| format!("{} ({})", guarantee.open, guarantee.needs))
        .collect();
    missing.join("; ")
}

/// The ABI the kernel reports, whatever it is. The query goes through libc's `syscall()` like
/// the `landlock` crate's own, so both always see the same answer (the ABI-floor test makes
/// the process see an older ABI by interposing that function).
fn landlock_abi() -> Result<i32, JailUnavailable> {
    // SAFETY: with a null attribute pointer, size 0 and the version flag, the call only
    // returns a number; it reads and writes no memory.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if version > 0 {
        return Ok(i32::try_from(version).unwrap_or(i32::MAX));
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EOPNOTSUPP) => Err(JailUnavailable::LandlockDisabled),
        _ => Err(JailUnavailable::NoLandlock),
    }
}

/// The ruleset of one command (its temporary directory `tmp` read-write on top of `rules`),
/// ready to be applied by [`restrict_self`]. `kernel_abi` is [`kernel_abi`]'s answer.
/// In the read-only jail (`writable_workspace` false) the workspace is granted read-only too,
/// so the temporary directory is the only place the command can write.
pub fn build(
    kernel_abi: i32,
    rules: &[PathRule],
    tmp: &Path,
    network: bool,
    writable_workspace: bool,
) -> Result<OwnedFd, SandboxError> {
    // At least ABI_FLOOR (`kernel_abi` refuses less), so every right and scope below exists.
    let abi = ABI::from(kernel_abi.clamp(ABI_FLOOR, TESTED_ABI));
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)?;
    // Without network the seccomp filter refuses every socket; TCP is denied here too, so a
    // gap in one layer is not a way out.
    if !network {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    // The command may not signal the daemon or anything else outside its own sandbox; without
    // network it may not reach abstract UNIX sockets outside it either.
    ruleset = if network {
        ruleset.scope(Scope::Signal)?
    } else {
        ruleset.scope(Scope::Signal | Scope::AbstractUnixSocket)?
    };
    let mut created = ruleset.create()?;
    for rule in rules {
        let access = match rule.access {
            Access::Read => read,
            Access::ReadWrite if rule.is_workspace && !writable_workspace => read,
            Access::ReadWrite => all,
        };
        created = created.add_rules(path_beneath_rules([&rule.path], access))?;
    }
    if !tmp.is_dir() {
        return Err(SandboxError::TempDir(io::Error::from(
            io::ErrorKind::NotFound,
        )));
    }
    created = created.add_rules(path_beneath_rules([tmp], all))?;
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or(SandboxError::NotEnforced)
}

/// Makes the daemon non-dumpable: its `/proc/<pid>/environ`, `mem` and `fd/` (where secrets
/// live) are then closed to processes of the same user that lack `CAP_SYS_PTRACE`, which
/// sandboxed commands do ([`restrict_self`] drops it). Landlock alone does not close them: a
/// sandboxed command could read its parent's `environ` on this project's kernels.
pub fn protect_daemon() {
    // SAFETY: prctl takes integers only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) } != 0 {
        tracing::warn!(error = %io::Error::last_os_error(), "Could not make the daemon non-dumpable.");
    }
}

/// Restricts the calling process with the ruleset `fd`: run in the child between `fork` and
/// `exec`, so it makes system calls only (see the module docs), then installs the seccomp
/// `filters` (with the network filter unless `network`). First it empties the capability
/// bounding set (a daemon running as root would otherwise hand `CAP_SYS_PTRACE` and the rest
/// to the command; without `CAP_SETPCAP` there is nothing to drop, and the calls fail
/// harmlessly) but for what `identity` keeps, then splits off the watcher
/// ([`super::watch::split`], from the ruleset `watch`) that ends everything the command starts;
/// only the command goes on from here, and becomes `identity` (when the daemon is root) before
/// it enters the jail.
pub fn restrict_self(
    fd: RawFd,
    watch: RawFd,
    filters: &Filters,
    network: bool,
    read_only: bool,
    identity: Option<Identity>,
) -> io::Result<()> {
    let keep = match identity {
        Some(_) => Identity::capabilities(read_only),
        None => 0,
    };
    for capability in 0..64u32 {
        if keep & (1 << capability) != 0 {
            continue;
        }
        // SAFETY: prctl takes integers only; an unknown capability or a missing CAP_SETPCAP
        // is an error that changes nothing.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, capability as libc::c_ulong, 0, 0, 0) };
    }
    // SAFETY: prctl takes integers only. No new privileges is what allows an unprivileged
    // process to restrict itself, and it keeps set-uid programs from escaping the ruleset.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    super::watch::split(watch)?;
    if let Some(identity) = identity {
        identity.assume(keep)?;
    }
    // SAFETY: landlock_restrict_self takes a descriptor and flags; the ruleset descriptor is
    // open in this process (inherited from the parent, which keeps it open until spawn ends).
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0 as libc::c_uint) } != 0 {
        return Err(io::Error::last_os_error());
    }
    filters.apply(network, read_only)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abi_below_the_floor_names_every_missing_guarantee() {
        assert_eq!(floor(6).ok(), Some(6));
        assert_eq!(floor(7).ok(), Some(7));
        let four = floor(4).unwrap_err();
        assert!(
            matches!(
                four,
                JailUnavailable::AbiBelowFloor {
                    found: 4,
                    needed: 6
                }
            ),
            "{four:?}"
        );
        let four = four.to_string();
        assert!(
            four.starts_with("Landlock ABI 4 < 6: commands could signal the daemon"),
            "{four}"
        );
        assert!(
            four.contains("Linux 6.12") && four.contains("Linux 6.10"),
            "{four}"
        );
        assert!(!four.contains("truncate"), "{four}");
        let two = floor(2).unwrap_err().to_string();
        assert!(
            two.contains("truncate any file they can read (truncation control needs Linux 6.2)"),
            "{two}"
        );
        assert!(two.contains("signal the daemon"), "{two}");
    }
}
