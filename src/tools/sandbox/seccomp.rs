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
//! - **always, by argument**: the calls that act on *another* process of the same user with no
//!   ptrace check (so Landlock's ptrace scoping does not cover them) answer `EPERM` unless they
//!   name the caller itself (pid or `who` 0): `prlimit64` (lowering the daemon's file size or
//!   descriptor limit kills or freezes it; a read, with no new limit, stays allowed for any
//!   pid), `setpriority` and `ioprio_set` (also never for a whole user), and the `sched_set*`
//!   calls. glibc's `setrlimit`, `nice` and `sched_setaffinity(0, …)` pass 0, so ordinary
//!   commands are untouched; a process naming itself by its own pid, or a thread pinning
//!   *another thread* by its tid, is refused too (a filter cannot know the caller's pid; the
//!   few runtimes that pin threads treat it as advisory).
//! - **always, IPC**: System V IPC (`msgget` … `shmctl`) and POSIX message queues (`mq_*`)
//!   answer `EPERM`. Their objects are named by a number or a name in one namespace for every
//!   process of the user, and Landlock mediates none of it: a jailed command could read and
//!   write other programs' queues and shared memory and remove them (`ipcrm --all`). The
//!   multiplexed `ipc` call exists only on architectures seccompiler does not build for (and
//!   i386 calls from x86-64 die on the architecture check).
//! - **without network** (every unapproved command; approved ones when `tools.shell.network`
//!   is off): `socket` answers `EACCES` for every family, so no TCP, UDP, raw, netlink or UNIX
//!   socket can be made. `socketpair` stays: it connects a process only to itself.
//! - **read-only** (every unapproved command): the calls that change a file's metadata
//!   (`chmod`, `chown`, times, extended attributes) answer `EPERM`: Landlock does not mediate
//!   them, so without this a read-only rule still let `chmod` and `touch -d` change a file.
//!   So do the `ioctl`s that change an inode through a descriptor opened for reading: its flags
//!   (`FS_IOC_SETFLAGS`, `chattr`), its extended flags and project (`FS_IOC_FSSETXATTR`), its
//!   generation (`FS_IOC_SETVERSION`), fs-verity (`FS_IOC_ENABLE_VERITY`, which makes a file
//!   read-only for good) and an encryption policy on an empty directory. Landlock's ioctl right
//!   (ABI 5) covers device files only. The request is compared on its low 32 bits, as the
//!   kernel reads it, so high garbage bits cannot slip a request past the filter.
//! - **x32** (x86-64 only): system calls with the x32 bit set answer `EPERM`, so the x32 numbers
//!   of the calls above cannot slip past a filter written for x86-64 numbers. seccompiler keys
//!   rules by exact number and cannot say "every number above", so this one four-instruction
//!   program is written here by hand.
//!
//! # Why a deny list, not an allow list
//!
//! A filter that allows only known calls would also close classes nobody listed yet, but it
//! breaks ordinary commands whenever a C library, an interpreter or `git` starts using a newer
//! call (`rseq`, `clone3`, `fchmodat2`, `futex_waitv`, `map_shadow_stack` each did), and the
//! jail runs whatever the model writes: bash, coreutils, git, python3, curl and their libraries
//! on every distribution. Instead the boundary is drawn by classes: Landlock at ABI 6 or later
//! (the floor, see [`super::ruleset::ABI_FLOOR`]) confines every path, TCP port, signal,
//! abstract socket and ptrace-style access; this filter closes what Landlock does not mediate
//! and can be named by class (namespaces and mounts, kernel objects, sockets, metadata, IPC,
//! calls that change another process without a ptrace check). Calls that reach another process
//! mostly go through the kernel's ptrace check or signal delivery, both inside Landlock's
//! scope; the few that check only the user id are the argument rules above.

use std::collections::BTreeMap;

use seccompiler::SeccompCmpArgLen::{self, Dword, Qword};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
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

/// System V IPC and POSIX message queues (see the module docs): no jailed command uses them.
const IPC: &[libc::c_long] = &[
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr,
];

/// Calls whose first argument is a pid (or tid) they change: allowed only for 0, the caller.
const OWN_PID_ONLY: &[libc::c_long] = &[
    libc::SYS_sched_setattr,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setaffinity,
];

/// `PRIO_USER`: `setpriority` on every process of a user.
const PRIO_USER: u64 = 2;

/// `IOPRIO_WHO_USER`: `ioprio_set` on every process of a user.
const IOPRIO_WHO_USER: u64 = 3;

/// The `ioctl` requests that change an inode through a descriptor opened for reading (see the
/// module docs), with their 32-bit variants where the size differs.
const INODE_IOCTLS: &[u64] = &[
    0x4008_6602, // FS_IOC_SETFLAGS
    0x4004_6602, // FS_IOC32_SETFLAGS
    0x401c_5820, // FS_IOC_FSSETXATTR
    0x4008_7602, // FS_IOC_SETVERSION
    0x4004_7602, // FS_IOC32_SETVERSION
    0x4080_6685, // FS_IOC_ENABLE_VERITY
    0x800c_6613, // FS_IOC_SET_ENCRYPTION_POLICY
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
pub struct FilterError(seccompiler::BackendError);

impl From<seccompiler::BackendError> for FilterError {
    fn from(error: seccompiler::BackendError) -> Self {
        Self(error)
    }
}

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
        let mut always: BTreeMap<i64, Vec<SeccompRule>> = DENIED
            .iter()
            .chain(IPC)
            .map(|&call| (call, Vec::new()))
            .collect();
        let namespace_rules = NAMESPACE_FLAGS
            .iter()
            .map(|&flag| {
                let flag = u64::from(flag.unsigned_abs());
                rule([(0, Qword, SeccompCmpOp::MaskedEq(flag), flag)])
            })
            .collect::<Result<Vec<_>, _>>()?;
        always.insert(libc::SYS_clone, namespace_rules);
        always.extend(other_process_rules()?);
        let read_only_ioctls = INODE_IOCTLS
            .iter()
            .map(|&request| rule([(1, Dword, SeccompCmpOp::Eq, request)]))
            .collect::<Result<Vec<_>, _>>()?;
        let mut read_only: BTreeMap<i64, Vec<SeccompRule>> =
            METADATA.iter().map(|&call| (call, Vec::new())).collect();
        read_only.insert(libc::SYS_ioctl, read_only_ioctls);
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
            read_only: deny(read_only, libc::EPERM)?,
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

/// The rules that refuse to change another process (see the module docs): each matches, and so
/// refuses, a call that names some other pid or a whole user. pids and `which` are C `int`s,
/// compared on their low 32 bits as the kernel reads them; the new limit is a pointer.
fn other_process_rules() -> Result<Vec<(i64, Vec<SeccompRule>)>, FilterError> {
    let mut rules = vec![
        (
            libc::SYS_prlimit64,
            vec![rule([
                (0, Dword, SeccompCmpOp::Ne, 0),
                (2, Qword, SeccompCmpOp::Ne, 0),
            ])?],
        ),
        (
            libc::SYS_setpriority,
            vec![
                rule([(1, Dword, SeccompCmpOp::Ne, 0)])?,
                rule([(0, Dword, SeccompCmpOp::Eq, PRIO_USER)])?,
            ],
        ),
        (
            libc::SYS_ioprio_set,
            vec![
                rule([(1, Dword, SeccompCmpOp::Ne, 0)])?,
                rule([(0, Dword, SeccompCmpOp::Eq, IOPRIO_WHO_USER)])?,
            ],
        ),
    ];
    for &call in OWN_PID_ONLY {
        rules.push((call, vec![rule([(0, Dword, SeccompCmpOp::Ne, 0)])?]));
    }
    Ok(rules)
}

/// One rule: every `(argument, width, comparison, value)` condition holds.
fn rule<const N: usize>(
    conditions: [(u8, SeccompCmpArgLen, SeccompCmpOp, u64); N],
) -> Result<SeccompRule, FilterError> {
    let conditions = conditions
        .into_iter()
        .map(|(arg, len, op, value)| SeccompCondition::new(arg, len, op, value))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SeccompRule::new(conditions)?)
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
