//! Who a jailed command runs as when the gateway runs as root: an unprivileged user
//! (`tools.shell.run_as`, default `nobody`), never root.
//!
//! Landlock and seccomp confine paths, sockets and the system calls that reach past the
//! process, but the kernel has more interfaces that only compare user ids (a process's
//! `/proc` files, limits and priorities of processes of the same user, files owned by root
//! whatever their mode), and new ones come with every release. A command that is not root
//! answers all of them "not yours" at once, so the jail does not have to name each.
//!
//! The command keeps one capability from root, `CAP_DAC_OVERRIDE` (and `CAP_FOWNER` in the
//! workspace jail): the daemon, as root, writes the workspace with mode 0600, and the owner's
//! read-only commands must still read it and approved ones change it. Those capabilities only
//! skip file modes; what the command may open at all is still Landlock's paths, which are the
//! same as before (the system read-only minus its secrets, the workspace, its TMPDIR). They
//! are handed over as *ambient* capabilities, the kernel's way to keep a capability across
//! `exec` for a non-root user; no new privilege can be gained on top (`no_new_privs`).
//!
//! Written with raw system calls rather than a capabilities crate: it runs in the child
//! between `fork` and `exec`, where only system calls are safe (no allocation, no locks).

use std::ffi::CString;
use std::io;

/// `CAP_DAC_OVERRIDE`: skip read, write and search permission checks.
const CAP_DAC_OVERRIDE: u32 = 1;
/// `CAP_FOWNER`: change modes and times of files one does not own.
const CAP_FOWNER: u32 = 3;
/// `SECBIT_NO_SETUID_FIXUP` and its lock: `access(2)` (git's check of its work tree, the
/// shell's `[ -r … ]`) then judges with the command's capabilities as `open` does, instead of
/// dropping them because the real user is not root.
const SECBITS: libc::c_ulong = (1 << 2) | (1 << 3);
/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// The user and group a command runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// The user id, never 0.
    pub uid: libc::uid_t,
    /// The group id (the user's primary group, or the uid's number without a passwd entry).
    pub gid: libc::gid_t,
}

/// Why `tools.shell.run_as` does not name a usable user.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityError {
    /// No such user in the system's user database.
    #[error(
        "tools.shell.run_as: no user {0:?} on this system (name an unprivileged user, or a uid)"
    )]
    Unknown(String),
    /// The name resolved to root, which is what the setting exists to avoid.
    #[error("tools.shell.run_as: {0:?} is root; commands must run as an unprivileged user")]
    Root(String),
}

impl Identity {
    /// The user commands run as when this process is root: `run_as` (a user name or a numeric
    /// uid), `nobody` when unset. `None` when this process is not root: then commands run as
    /// this process's user, which is already not root.
    pub fn for_commands(run_as: Option<&str>) -> Result<Option<Self>, IdentityError> {
        // SAFETY: geteuid takes nothing and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Ok(None);
        }
        let name = run_as.unwrap_or("nobody");
        let identity = match lookup(name) {
            Some(found) => found,
            None => match name.parse::<libc::uid_t>() {
                Ok(uid) => Self { uid, gid: uid },
                Err(_) => return Err(IdentityError::Unknown(name.to_owned())),
            },
        };
        if identity.uid == 0 || identity.gid == 0 {
            return Err(IdentityError::Root(name.to_owned()));
        }
        Ok(Some(identity))
    }

    /// The capabilities a command keeps: see the module docs.
    pub fn capabilities(read_only: bool) -> u64 {
        let mut set = 1 << CAP_DAC_OVERRIDE;
        if !read_only {
            set |= 1 << CAP_FOWNER;
        }
        set
    }

    /// Becomes this user in the child between `fork` and `exec`, keeping only `keep` (from
    /// [`Identity::capabilities`]) as ambient capabilities. The caller is root with its
    /// capabilities still effective; system calls only. With `SECBIT_NO_SETUID_FIXUP` the
    /// change of user leaves the capability sets alone, so `capset` narrows them to `keep`.
    pub fn assume(self, keep: u64) -> io::Result<()> {
        // SAFETY: each call takes integers or a null list; none touches memory of ours but the
        // capability structs below, which live on this stack for the call's duration.
        unsafe {
            check(libc::prctl(libc::PR_SET_SECUREBITS, SECBITS, 0, 0, 0))?;
            check(libc::setgroups(0, std::ptr::null()))?;
            check(libc::setresgid(self.gid, self.gid, self.gid))?;
            check(libc::setresuid(self.uid, self.uid, self.uid))?;
        }
        capset(keep)?;
        for capability in 0..64u32 {
            if keep & (1 << capability) != 0 {
                // SAFETY: prctl takes integers only.
                check(unsafe {
                    libc::prctl(
                        libc::PR_CAP_AMBIENT,
                        libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                        capability as libc::c_ulong,
                        0,
                        0,
                    )
                })?;
            }
        }
        Ok(())
    }
}

/// The kernel's capability header (`struct __user_cap_header_struct`).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// One 32-bit word of each set (`struct __user_cap_data_struct`).
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Sets this thread's effective, permitted and inheritable capabilities to exactly `set`.
fn capset(set: u64) -> io::Result<()> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let word = |shift: u32| {
        let bits = (set >> shift) as u32;
        CapData {
            effective: bits,
            permitted: bits,
            inheritable: bits,
        }
    };
    let data = [word(0), word(32)];
    // SAFETY: the header and the two data words are the layout capset(2) reads for version 3.
    check(unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        ) as libc::c_int
    })
}

/// The user `name` in the system's user database, if any.
fn lookup(name: &str) -> Option<Identity> {
    let name = CString::new(name).ok()?;
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwnam_r writes the entry into `entry` and its strings into `buffer`, both
    // owned here and sized as passed; `found` points at `entry` or stays null.
    let status = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    (status == 0 && !found.is_null()).then_some(Identity {
        uid: entry.pw_uid,
        gid: entry.pw_gid,
    })
}

/// A system call's `-1` as the error in `errno`.
fn check(status: libc::c_int) -> io::Result<()> {
    if status == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_unknown_users_are_refused_by_name() {
        // SAFETY: geteuid takes nothing.
        if unsafe { libc::geteuid() } != 0 {
            assert_eq!(Identity::for_commands(Some("root")), Ok(None));
            return;
        }
        assert_eq!(
            Identity::for_commands(Some("root")),
            Err(IdentityError::Root("root".into()))
        );
        assert_eq!(
            Identity::for_commands(Some("0")),
            Err(IdentityError::Root("0".into()))
        );
        assert!(matches!(
            Identity::for_commands(Some("no-such-user-squidbot")),
            Err(IdentityError::Unknown(_))
        ));
        let nobody = Identity::for_commands(None).unwrap().unwrap();
        assert_ne!(nobody.uid, 0);
        assert_eq!(
            Identity::for_commands(Some("4242")),
            Ok(Some(Identity {
                uid: 4242,
                gid: 4242
            }))
        );
    }

    #[test]
    fn the_read_only_jail_keeps_no_right_to_change_modes() {
        assert_eq!(Identity::capabilities(true), 1 << CAP_DAC_OVERRIDE);
        assert_eq!(
            Identity::capabilities(false),
            (1 << CAP_DAC_OVERRIDE) | (1 << CAP_FOWNER)
        );
    }
}
