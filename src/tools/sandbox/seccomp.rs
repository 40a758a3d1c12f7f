//! seccomp: the system calls a jailed command may not make, whatever the file rules say.
//!
//! Landlock mediates paths and TCP ports, but not everything that leaves the jail: a UNIX
//! socket bound on the file system (the docker socket, the owner's D-Bus) is reached by
//! `connect`, which no Landlock right covers on the kernels this project runs on; UDP has no
//! Landlock right at all; and a handful of calls reach past the process (`ptrace`,
//! `process_vm_readv`, namespaces, `io_uring`, which would make sockets behind seccomp's back).
//! So every jailed command also gets these filters, built once at start with `seccompiler`
//! (rust-vmm's BPF compiler, used by Firecracker) and installed in the child right before
//! `exec`:
//!
//! - **always**: the calls above answer `EPERM`; `clone` with a namespace flag too; `clone3`
//!   answers `ENOSYS` (its flags sit behind a pointer no filter can read, and C libraries fall
//!   back to `clone` on `ENOSYS`). A call for another architecture (`int 0x80` on x86-64) kills
//!   the process: seccompiler's architecture check.
//! - **without network** (every unapproved command; approved ones when `tools.shell.network`
//!   is off): `socket` answers `EACCES` for every family, so no TCP, UDP, raw, netlink or UNIX
//!   socket can be made. `socketpair` stays: it connects a process only to itself.
//! - **read-only** (every unapproved command): the calls that change a file's metadata
//!   (`chmod`, `chown`, times, extended attributes) answer `EPERM`: Landlock does not mediate
//!   them, so without this a read-only rule still let `chmod` and `touch -d` change a file.
//! - **x32** (x86-64 only): system calls with the x32 bit set answer `EPERM`, so the x32 numbers
//!   of the calls above cannot slip past a filter written for x86-64 numbers. seccompiler keys
//!   rules by exact number and cannot say "every number above", so this one four-instruction
//!   program is written here by hand.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// System calls no jailed command may make: each reaches past its own process and files.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_open_by_handle_at,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_kexec_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_fanotify_init,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
];

/// System calls that change a file's metadata: Landlock does not mediate them (a read-only
/// rule still lets `chmod`, `chown`, `touch -d` and `setfattr` change a file), so the read-only
/// jail refuses them outright, its own TMPDIR included.
const METADATA: &[libc::c_long] = &[
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchown,
    libc::SYS_fchownat,
    libc::SYS_utimensat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    // fchmodat2, setxattrat and removexattrat share one number on every architecture (Linux
    // 6.6 and 6.13); the libc crate does not name them all yet.
    452,
    463,
    466,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chmod,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lchown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utime,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utimes,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_futimesat,
];

/// The `clone` flags that make a new namespace.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// Why the filters could not be built (an architecture seccompiler does not know).
#[derive(Debug, thiserror::Error)]
#[error("the seccomp filter could not be built: {0}")]
pub struct FilterError(#[from] seccompiler::BackendError);

/// The compiled filters of the jails.
#[derive(Debug, Clone)]
pub struct Filters {
    always: BpfProgram,
    clone3: BpfProgram,
    no_network: BpfProgram,
    read_only: BpfProgram,
    x32: Option<BpfProgram>,
}

impl Filters {
    /// Compiles the filters for this machine's architecture.
    pub fn new() -> Result<Self, FilterError> {
        let arch = TargetArch::try_from(std::env::consts::ARCH)?;
        let mut always: BTreeMap<i64, Vec<SeccompRule>> =
            DENIED.iter().map(|&call| (call, Vec::new())).collect();
        let namespace_rules = NAMESPACE_FLAGS
            .iter()
            .map(|&flag| {
                let flag = u64::from(flag.unsigned_abs());
                SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(flag),
                    flag,
                )
                .and_then(|condition| SeccompRule::new(vec![condition]))
            })
            .collect::<Result<Vec<_>, _>>()?;
        always.insert(libc::SYS_clone, namespace_rules);
        let deny = |rules, errno: i32| -> Result<BpfProgram, FilterError> {
            let filter = SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(errno.unsigned_abs()),
                arch,
            )?;
            Ok(BpfProgram::try_from(filter)?)
        };
        Ok(Self {
            always: deny(always, libc::EPERM)?,
            clone3: deny(
                BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
                libc::ENOSYS,
            )?,
            no_network: deny(
                BTreeMap::from([(libc::SYS_socket, Vec::new())]),
                libc::EACCES,
            )?,
            read_only: deny(
                METADATA.iter().map(|&call| (call, Vec::new())).collect(),
                libc::EPERM,
            )?,
            x32: x32_filter(),
        })
    }

    /// Installs the filters in the calling process: the child between `fork` and `exec`, so
    /// this makes system calls only (`seccompiler::apply_filter` builds its `sock_fprog` on the
    /// stack and allocates nothing). `PR_SET_NO_NEW_PRIVS` must already be set. Without
    /// `network` no socket can be made; `read_only` refuses every metadata change.
    pub fn apply(&self, network: bool, read_only: bool) -> std::io::Result<()> {
        let programs = [
            Some(&self.always),
            Some(&self.clone3),
            self.x32.as_ref(),
            (!network).then_some(&self.no_network),
            read_only.then_some(&self.read_only),
        ];
        for program in programs.into_iter().flatten() {
            seccompiler::apply_filter(program).map_err(|error| match error {
                seccompiler::Error::Seccomp(error) | seccompiler::Error::Prctl(error) => error,
                _ => std::io::Error::from_raw_os_error(libc::EINVAL),
            })?;
        }
        Ok(())
    }
}

/// On x86-64: every system call numbered with the x32 bit answers `EPERM`.
#[cfg(target_arch = "x86_64")]
fn x32_filter() -> Option<BpfProgram> {
    use seccompiler::sock_filter;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    // BPF_LD | BPF_W | BPF_ABS, BPF_JMP | BPF_JGE | BPF_K, BPF_RET | BPF_K.
    const LOAD_WORD: u16 = 0x20;
    const JUMP_GE: u16 = 0x35;
    const RETURN: u16 = 0x06;
    const RET_ERRNO: u32 = 0x0005_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    let instruction = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    Some(vec![
        // seccomp_data.nr is the first word.
        instruction(LOAD_WORD, 0, 0, 0),
        instruction(JUMP_GE, 0, 1, X32_SYSCALL_BIT),
        instruction(RETURN, 0, 0, RET_ERRNO | libc::EPERM.unsigned_abs()),
        instruction(RETURN, 0, 0, RET_ALLOW),
    ])
}

/// Elsewhere there is no x32.
#[cfg(not(target_arch = "x86_64"))]
fn x32_filter() -> Option<BpfProgram> {
    None
}
