//! What reaches past the jail without a path or a socket (#35): another process's limits and
//! priority, System V IPC, inode flags, the daemon's workspace lock, and processes that leave
//! the command's process group. Each test runs real jailed commands and judges by the effect on
//! a process or object outside the jail, read by this process.

use std::ffi::c_void;
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{Layout, jailed, layout, sandbox};
use crate::core::ports::store::MemoryStore;
use crate::storage::MemoryFile;
use crate::storage::file_lock::WorkspaceLock;
use crate::tools::sandbox::{Jail, Sandbox};
use crate::tools::shell::tests::{alive, assert_all_dead, pids};
use crate::tools::shell::{OUTPUT_CAP, Run, run};

/// A process outside the jail, killed when dropped.
struct Outside(Child);

impl Outside {
    fn start() -> Self {
        let child = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The line of `/proc/<pid>/limits` naming `limit` ("Max open files").
fn limit(pid: u32, limit: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .unwrap()
        .lines()
        .find(|line| line.starts_with(limit))
        .unwrap()
        .to_owned()
}

/// The nice value of `pid` (field 19 of `/proc/<pid>/stat`).
fn nice(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(") ").unwrap();
    rest.split(' ').nth(16).unwrap().to_owned()
}

/// Runs `command` read-only in the workspace with `timeout`.
async fn run_for(sandbox: &Sandbox, layout: &Layout, command: &str, timeout: Duration) -> Run {
    run(
        command,
        &layout.workspace,
        timeout,
        OUTPUT_CAP,
        sandbox,
        Jail::ReadOnly,
    )
    .await
    .unwrap()
}

// See: #35
#[tokio::test]
async fn issue_35_no_command_changes_another_processs_limits_or_priority() {
    let layout = layout();
    let sandbox = sandbox(&layout, true);
    let outside = Outside::start();
    let pid = outside.pid();
    let (files, size, priority) = (
        limit(pid, "Max open files"),
        limit(pid, "Max file size"),
        nice(pid),
    );
    for jail in [Jail::ReadOnly, Jail::Workspace] {
        for command in [
            format!("prlimit --pid {pid} --nofile=1"),
            format!("prlimit --pid {pid} --fsize=0"),
            format!("command prlimit --pid {pid} --fsize=0 -v"),
            format!("renice -n 19 -p {pid}"),
            format!("ionice -c 3 -p {pid}"),
            format!("taskset -p 1 {pid}"),
            format!("chrt -i -p 0 {pid}"),
        ] {
            let (ok, output) = jailed(&sandbox, &layout.workspace, &command, jail).await;
            assert!(!ok, "{jail:?}: {command} worked: {output}");
        }
    }
    assert_eq!(limit(pid, "Max open files"), files);
    assert_eq!(limit(pid, "Max file size"), size);
    assert_eq!(nice(pid), priority);
    // The command's own limits and priority still work; reading another's too, unless the
    // test runs as root: then the command is another user (identity), to whom they are closed.
    let read = format!("prlimit --pid {pid} --nofile --noheadings");
    let own = format!("ulimit -n 64 && ulimit -n && nice -n 5 nice && {read}");
    let (ok, output) = jailed(&sandbox, &layout.workspace, &own, Jail::ReadOnly).await;
    // SAFETY: geteuid takes nothing.
    let root = unsafe { libc::geteuid() == 0 };
    assert_eq!(ok, !root, "{output}");
    assert!(output.starts_with("64\n5\n"), "{output}");
}

/// A message queue and a shared memory segment owned by this process, removed when dropped.
struct Ipc {
    queue: i32,
    segment: i32,
    memory: *mut c_void,
}

impl Ipc {
    const BYTES: &[u8] = b"outside-owned";

    fn new() -> Self {
        // SAFETY: plain System V calls on new private objects; the segment is attached and
        // written within its size, and every pointer passed is to a live local.
        unsafe {
            let queue = libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600);
            assert!(queue >= 0, "{}", std::io::Error::last_os_error());
            let message = (1 as libc::c_long, *b"hello\0\0\0");
            let sent = libc::msgsnd(queue, (&raw const message).cast(), 8, 0);
            assert_eq!(sent, 0, "{}", std::io::Error::last_os_error());
            let segment = libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600);
            assert!(segment >= 0, "{}", std::io::Error::last_os_error());
            let memory = libc::shmat(segment, std::ptr::null(), 0);
            assert_ne!(memory as isize, -1);
            std::ptr::copy_nonoverlapping(Self::BYTES.as_ptr(), memory.cast(), Self::BYTES.len());
            Self {
                queue,
                segment,
                memory,
            }
        }
    }

    /// Messages in the queue, or `None` when it is gone.
    fn messages(&self) -> Option<u64> {
        // SAFETY: IPC_STAT writes into a zeroed local of the right type.
        unsafe {
            let mut stat: libc::msqid_ds = std::mem::zeroed();
            (libc::msgctl(self.queue, libc::IPC_STAT, &mut stat) == 0).then_some(stat.msg_qnum)
        }
    }

    /// Whether the segment still exists.
    fn segment_exists(&self) -> bool {
        // SAFETY: as above.
        unsafe {
            let mut stat: libc::shmid_ds = std::mem::zeroed();
            libc::shmctl(self.segment, libc::IPC_STAT, &mut stat) == 0
        }
    }

    /// The segment's first bytes.
    fn memory(&self) -> Vec<u8> {
        // SAFETY: the segment is attached for the life of `self` and 4096 bytes long.
        unsafe { std::slice::from_raw_parts(self.memory.cast::<u8>(), Self::BYTES.len()).to_vec() }
    }
}

impl Drop for Ipc {
    fn drop(&mut self) {
        // SAFETY: detaching our own attachment and removing our own objects.
        unsafe {
            libc::shmdt(self.memory);
            libc::shmctl(self.segment, libc::IPC_RMID, std::ptr::null_mut());
            libc::msgctl(self.queue, libc::IPC_RMID, std::ptr::null_mut());
        }
    }
}

// See: #35
#[tokio::test]
async fn issue_35_sysv_ipc_outside_the_jail_is_untouched() {
    let layout = layout();
    let sandbox = sandbox(&layout, true);
    let ipc = Ipc::new();
    let (queue, segment) = (ipc.queue, ipc.segment);
    let python =
        |code: &str| format!("python3 -c 'import ctypes; libc = ctypes.CDLL(None); {code}'");
    for jail in [Jail::ReadOnly, Jail::Workspace] {
        for command in [
            "ipcrm --all".to_owned(),
            format!("ipcrm -q {queue}"),
            format!("ipcrm -m {segment}"),
            // ipcs lists them (from /proc/sysvipc, which is read-only); acting on the list fails.
            format!(
                "for id in $(ipcs -q | awk '$2 == {queue} {{print $2}}'); do \
                 ipcrm -q $id || exit 1; done; \
                 ipcs -m | awk '$2 == {segment} {{print $2}}' | xargs -r -n1 ipcrm -m"
            ),
            python(&format!(
                "b = ctypes.create_string_buffer(b\"\\1\\0\\0\\0\\0\\0\\0\\0pwned\", 16); \
                 assert libc.msgsnd({queue}, b, 8, 0) == 0"
            )),
            python(&format!(
                "b = ctypes.create_string_buffer(64); \
                 assert libc.msgrcv({queue}, b, 8, 0, 0o4000) >= 0"
            )),
            python(&format!(
                "libc.shmat.restype = ctypes.c_void_p; p = libc.shmat({segment}, None, 0); \
                 assert p not in (None, 2**64 - 1); ctypes.memmove(p, b\"PWNED\", 5)"
            )),
        ] {
            let (ok, output) = jailed(&sandbox, &layout.workspace, &command, jail).await;
            assert!(!ok, "{jail:?}: {command} worked: {output}");
        }
    }
    assert_eq!(
        ipc.messages(),
        Some(1),
        "the queue lost or gained a message"
    );
    assert!(ipc.segment_exists());
    assert_eq!(ipc.memory(), Ipc::BYTES);
}

/// The flags `lsattr -d` shows for `path`, or `None` where the file system keeps none.
fn flags(path: &Path) -> Option<String> {
    let output = Command::new("lsattr").arg("-d").arg(path).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

// See: #35
#[tokio::test]
async fn issue_35_the_read_only_jail_changes_no_inode_flags() {
    let layout = layout();
    let sandbox = sandbox(&layout, true);
    let file = layout.workspace.join("notes.txt");
    std::fs::write(&file, "kept\n").unwrap();
    let Some(before) = flags(&file) else {
        println!(
            "skipped: the file system of {} keeps no inode flags (tmpfs?)",
            file.display()
        );
        return;
    };
    for command in [
        "chattr +d notes.txt",
        "chattr +A notes.txt",
        "chattr +i notes.txt",
        "chattr -p 7 notes.txt",
        "chattr -v 42 notes.txt",
    ] {
        let (ok, output) = jailed(&sandbox, &layout.workspace, command, Jail::ReadOnly).await;
        assert!(!ok, "{command} worked: {output}");
    }
    assert_eq!(flags(&file), Some(before));
    // Reading the flags is not changing them.
    let (ok, output) = jailed(
        &sandbox,
        &layout.workspace,
        "lsattr notes.txt",
        Jail::ReadOnly,
    )
    .await;
    assert!(ok, "{output}");
}

// See: #35
#[tokio::test]
async fn issue_35_a_commands_flock_cannot_block_the_workspace_lock() {
    let layout = layout();
    let sandbox = sandbox(&layout, true);
    let lock = WorkspaceLock::new(&layout.home, &layout.workspace);
    let (lock_dir, lock_path) = (
        lock.path().parent().unwrap().to_owned(),
        lock.path().to_owned(),
    );
    std::fs::create_dir_all(&lock_dir).unwrap();
    File::create(&lock_path).unwrap();
    // Every lock a command could reach: the workspace, its files, and the real lock file.
    let holder = format!(
        "flock -n {} true && echo TOOK-THE-LOCK; \
         echo held; flock -x . sleep 3 & flock -x MEMORY.md sleep 3 & wait",
        lock_path.display()
    );
    std::fs::write(layout.workspace.join("MEMORY.md"), "old\n").unwrap();
    let running = {
        let workspace = layout.workspace.clone();
        let sandbox = sandbox.clone();
        tokio::spawn(async move { jailed(&sandbox, &workspace, &holder, Jail::ReadOnly).await })
    };
    // The command holds a lock on the workspace (what the daemon took before #35)...
    let workspace = File::open(&layout.workspace).unwrap();
    let mut held = false;
    for _ in 0..40 {
        if workspace.try_lock().is_err() {
            held = true;
            break;
        }
        workspace.unlock().unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(held, "the command never took its flock");
    // ...and the daemon's lock and MEMORY.md's writer go on regardless.
    let acquired = tokio::time::timeout(
        Duration::from_secs(1),
        tokio::task::spawn_blocking(move || lock.acquire().map(drop)),
    )
    .await;
    assert!(matches!(acquired, Ok(Ok(Ok(())))), "{acquired:?}");
    let memory = MemoryFile::new(&layout.workspace)
        .with_lock(WorkspaceLock::new(&layout.home, &layout.workspace));
    let replaced = tokio::time::timeout(Duration::from_secs(1), memory.replace("new\n")).await;
    assert!(matches!(replaced, Ok(Ok(_))), "{replaced:?}");
    let (_, output) = running.await.unwrap();
    assert!(output.contains("held"), "the command ran: {output}");
    assert!(!output.contains("TOOK-THE-LOCK"), "{output}");
}

// See: #35
#[tokio::test]
async fn issue_35_processes_that_leave_the_group_end_with_the_command() {
    let layout = layout();
    let sandbox = sandbox(&layout, true);
    let escape = "setsid sh -c 'echo PID $$; exec sleep 1000' & \
                  (setsid sh -c 'echo PID $$; exec sleep 1001' &) ; \
                  setsid -f sh -c 'echo PID $$; exec sleep 1002'; sleep 0.3; echo started";
    for jail in [Jail::ReadOnly, Jail::Workspace] {
        let started = std::time::Instant::now();
        let (ok, output) = jailed(&sandbox, &layout.workspace, escape, jail).await;
        assert!(ok && output.contains("started"), "{output}");
        assert!(started.elapsed() < Duration::from_secs(3), "{output}");
        let pids = pids(&output);
        assert_eq!(pids.len(), 3, "{output}");
        for pid in pids {
            assert!(
                !alive(pid),
                "{jail:?}: {pid} outlived its command: {output}"
            );
        }
    }
    // At the timeout too, and the exit status is still the command's own.
    let run = run_for(
        &sandbox,
        &layout,
        &format!("{escape}; sleep 100"),
        Duration::from_secs(1),
    )
    .await;
    assert!(run.timed_out, "{}", run.output);
    for pid in pids(&run.output) {
        assert!(!alive(pid), "{pid} outlived the timeout: {}", run.output);
    }
    for (command, code, signal) in [("exit 3", Some(3), None), ("kill -9 $$", None, Some(9))] {
        let run = run_for(&sandbox, &layout, command, Duration::from_secs(5)).await;
        let status = run.status.unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            (status.code(), status.signal()),
            (code, signal),
            "{command}"
        );
    }
}

// See: #35
#[tokio::test]
async fn issue_35_a_dropped_call_ends_every_process_of_its_command() {
    let layout = layout();
    let sandbox = sandbox(&layout, true);
    let pids_file = layout.workspace.join("pids");
    let command = "setsid sh -c 'echo PID $$ >> pids; exec sleep 1003' & \
                   (setsid sh -c 'echo PID $$ >> pids; exec sleep 1004' &); \
                   echo PID $$ >> pids; sleep 100";
    let running = {
        let workspace = layout.workspace.clone();
        let sandbox = sandbox.clone();
        tokio::spawn(async move { jailed(&sandbox, &workspace, command, Jail::Workspace).await })
    };
    let mut started = Vec::new();
    for _ in 0..40 {
        started = pids(&std::fs::read_to_string(&pids_file).unwrap_or_default());
        if started.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(started.len(), 3, "the command did not start: {started:?}");
    // The turn is cancelled (shutdown, a dropped request): the call's future is dropped.
    running.abort();
    let _ = running.await;
    assert_all_dead(&started).await;
}

// See: #35
#[tokio::test]
async fn issue_35_ordinary_commands_still_set_their_own_limits_and_priority() {
    let layout = layout();
    let sandbox = sandbox(&layout, true);
    for command in [
        "nice -n 5 true && ionice -c 3 true && taskset -c 0 true && chrt -b 0 true",
        "timeout 1 sleep 5; test $? = 124",
        "python3 -c 'import os, resource; os.sched_setaffinity(0, {0}); os.nice(1); \
         resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)); print(resource.getrlimit(resource.RLIMIT_NOFILE))'",
        "sort --parallel=2 -S 1M /etc/passwd > /dev/null && git --version",
        "printf 'a\\nb\\n' | xargs -P 2 -n 1 echo | wc -l",
    ] {
        for jail in [Jail::ReadOnly, Jail::Workspace] {
            let (ok, output) = jailed(&sandbox, &layout.workspace, command, jail).await;
            assert!(ok, "{jail:?}: {command}: {output}");
        }
    }
}

// See: #35
#[tokio::test]
async fn issue_35_a_command_ending_leaves_another_commands_processes_alone() {
    let layout = layout();
    let sandbox = sandbox(&layout, true);
    // Two sessions' commands at once: the watcher of the one that ends first kills its own
    // domain only (each command's domain is a sibling of the other's, from one ruleset).
    let long = {
        let workspace = layout.workspace.clone();
        let sandbox = sandbox.clone();
        tokio::spawn(async move {
            jailed(
                &sandbox,
                &workspace,
                "setsid sleep 2 & sleep 2; wait; echo survived",
                Jail::ReadOnly,
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    for jail in [Jail::ReadOnly, Jail::Workspace] {
        let (ok, output) = jailed(&sandbox, &layout.workspace, "sleep 0.1 &", jail).await;
        assert!(ok, "{output}");
    }
    let (ok, output) = long.await.unwrap();
    assert!(ok && output.contains("survived"), "{output}");
}
