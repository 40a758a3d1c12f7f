//! `shell`: runs a command with `bash -c` in the workspace, jailed, with a timeout that kills
//! the whole process tree and output capped to what a model can use.
//!
//! The command gets its own process group (`process_group(0)`), stdin from `/dev/null`, and one
//! pipe for both stdout and stderr, so their order is kept. A jailed command runs under its
//! watcher ([`crate::tools::sandbox::watch`]), which kills and reaps everything the command
//! started when it ends, `setsid` escapees included; at the timeout (or when the call is
//! dropped) the daemon tells the watcher to do so at once. Unconfined (`sandbox: off`), the
//! whole group is killed with `SIGKILL` at the timeout and when the command finishes, so
//! background children (`cmd &`) never outlive the call, but a process that leaves the group
//! (`setsid`) escapes that; reading its output stops after [`DRAIN_GRACE`]. Output keeps its
//! head and tail ([`OUTPUT_CAP`] in all) and announces the cut. The exit code is always
//! reported; non-zero, a signal or a timeout make an error result.
//!
//! Which jail ([`Jail`]) a command runs in is decided here, and the jail is the boundary: a
//! command the owner did not approve runs read-only with no network, whatever the allow list
//! ([`crate::tools::shell_policy`]) predicted about it. The allow list decides only whether the
//! owner is asked *before* running: a command it covers runs at once, read-only; any other
//! command, and any call with `"write": true`, waits for the owner's approval through the
//! turn's gate and then runs in the workspace jail. Turns with no one to ask (heartbeat, cron,
//! sub-agents) run read-only, except the exact command lines the owner granted ahead of time
//! in `tools.shell.unattended_writes`. When a read-only run fails, the result says how to ask.
//!
//! Commands run with `bash`, the shell whose grammar the policy's parser reads, so the judge
//! and the shell never read one line two ways. `libc` (already in the tree through tokio)
//! provides `killpg`; it is smaller than `nix` and avoids spawning `kill` processes.

mod grant;

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use crate::approval::{ApprovalMode, Refusal};
use crate::core::authority::{Effect, Effects};
use crate::core::ports::tool::{ToolContext, ToolOutput, TypedSpec, TypedTool};
use crate::core::untrusted;
use crate::tools::sandbox::{Jail, Sandbox};
use crate::tools::shell_policy::{AllowList, Judgement, judge};

/// Longest timeout a call may ask for, in seconds.
pub const MAX_TIMEOUT_SECONDS: u64 = 600;
/// Most bytes of output returned: half from the start, half from the end. A kilobyte under the
/// turn's 16 KiB result cap, which leaves room for the exit code, the fence around the output
/// and a note, so the cap never cuts the fence's closing marker.
pub const OUTPUT_CAP: usize = 15 * 1024;
/// How long output is still read after the process group was killed.
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Runs shell commands in the workspace.
pub struct ShellTool {
    cwd: PathBuf,
    default_timeout: u64,
    spec: TypedSpec<Arguments>,
    /// What runs without the owner's approval.
    allow: AllowList,
    /// Whether anything asks at all.
    approval: ApprovalMode,
    /// Command lines turns with no one to ask may run in the workspace jail, each pinned to
    /// the workspace files it names.
    unattended_writes: Vec<grant::Grant>,
    sandbox: Arc<Sandbox>,
}

/// The arguments of `shell`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arguments {
    /// The command line.
    command: String,
    /// Seconds.
    #[schemars(range(min = 1, max = MAX_TIMEOUT_SECONDS))]
    timeout: Option<u64>,
    /// true: may write and use the network (asks the owner). Else read-only.
    write: Option<bool>,
}

impl ShellTool {
    /// The tool running commands in `cwd`, with `default_timeout_seconds` unless a call says
    /// otherwise (clamped to 1..=[`MAX_TIMEOUT_SECONDS`]).
    pub fn new(cwd: &Path, default_timeout_seconds: u64) -> Self {
        let default_timeout = default_timeout_seconds.clamp(1, MAX_TIMEOUT_SECONDS);
        let spec = TypedSpec::new(
            "shell",
            format!(
                "Run `bash -c` in the workspace; returns the exit code and output (long output \
                 keeps start and end). Default timeout {default_timeout}s."
            ),
        );
        Self {
            cwd: cwd.to_owned(),
            default_timeout,
            spec,
            allow: AllowList::default(),
            approval: ApprovalMode::Ask,
            unattended_writes: Vec::new(),
            sandbox: Arc::new(Sandbox::off(cwd)),
        }
    }

    /// The tool with its commands run in `sandbox` (instead of unconfined).
    pub fn with_sandbox(mut self, sandbox: Arc<Sandbox>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// Runs only what `allow` covers without asking (or everything, with
    /// [`ApprovalMode::Off`]); by default the read-only [`AllowList::default`] and asking.
    pub fn with_approval(mut self, allow: AllowList, approval: ApprovalMode) -> Self {
        self.allow = allow;
        self.approval = approval;
        self
    }

    /// Lets turns with no one to ask (heartbeat, cron, sub-agents) run exactly these command
    /// lines in the workspace jail (`tools.shell.unattended_writes`), while the workspace files
    /// they name hold what they held now (see [`grant`]).
    pub fn with_unattended_writes(mut self, commands: Vec<String>) -> Self {
        self.unattended_writes = commands
            .iter()
            .map(|line| grant::Grant::pinned(line, &self.cwd))
            .collect();
        self
    }

    /// The jail `command` runs in, after the owner's approval where it needs one; the refusal
    /// the model reads otherwise.
    async fn jail_for(
        &self,
        command: &str,
        write: bool,
        context: &ToolContext,
    ) -> Result<Jail, ToolOutput> {
        if self.approval == ApprovalMode::Off {
            return Ok(Jail::Workspace);
        }
        let reason = if !context.audience.is_owner() {
            // Any command, `cat` included, could show the others the owner's private files
            // (MEMORY.md, USER.md) that their turns leave out of the prompt.
            "others take part in this conversation, so every command needs the owner's approval"
                .to_owned()
        } else if write {
            "it asks to write in the workspace or use the network".to_owned()
        } else {
            match judge(command, &self.allow) {
                Judgement::Allowed => return Ok(Jail::ReadOnly),
                Judgement::Ask(reason) => reason,
            }
        };
        let unattended = context
            .approvals
            .as_ref()
            .is_none_or(|gate| gate.is_unattended());
        let granted = self.unattended_writes.iter().find(|g| g.covers(command));
        if let (true, Some(granted)) = (unattended, granted) {
            let grant = granted.clone();
            let changed = tokio::task::spawn_blocking(move || grant.changed().map(Path::to_owned))
                .await
                .unwrap_or(None);
            match changed {
                None => {
                    tracing::info!(session = %context.session, "Shell command granted by unattended_writes.");
                    return Ok(Jail::Workspace);
                }
                Some(path) => {
                    tracing::warn!(session = %context.session, path = %path.display(), "A command of unattended_writes was refused: a file it runs changed since the gateway started.");
                    return Err(ToolOutput::error(format!(
                        "Error: this command is granted in tools.shell.unattended_writes, but {} \
                         changed since the gateway started, so it is not the granted one. The \
                         owner must check the change and restart the gateway (or approve the \
                         command).",
                        path.display()
                    )));
                }
            }
        }
        let refusal = match &context.approvals {
            Some(gate) => match gate.permit("shell", command, &reason).await {
                Ok(()) => return Ok(Jail::Workspace),
                Err(refusal) => refusal,
            },
            None => Refusal::Unattended("there is no turn to ask the owner from".to_owned()),
        };
        tracing::info!(session = %context.session, reason, "Shell command refused.");
        Err(ToolOutput::error(refusal.message(command)))
    }
}

/// Said after a read-only run that failed, so the model asks instead of trying other ways.
const READ_ONLY_NOTE: &str = "\n[This command ran without the owner's approval, so read-only: \
     it cannot write outside $TMPDIR, open any network or UNIX socket, or signal other \
     processes. If it failed for that reason, call shell again with \"write\": true to ask the \
     owner.]";

#[async_trait]
impl TypedTool for ShellTool {
    type Arguments = Arguments;

    fn definition(&self) -> &TypedSpec<Arguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::RunsCommands, Effect::Network])
    }

    async fn run(&self, arguments: Arguments, context: &ToolContext) -> ToolOutput {
        if arguments.command.trim().is_empty() {
            return ToolOutput::error("Error: the command is empty.");
        }
        let write = arguments.write.unwrap_or(false);
        let jail = match self.jail_for(&arguments.command, write, context).await {
            Ok(jail) => jail,
            Err(refusal) => return refusal,
        };
        let seconds = arguments
            .timeout
            .unwrap_or(self.default_timeout)
            .clamp(1, MAX_TIMEOUT_SECONDS);
        let started = Instant::now();
        let run = match run(
            &arguments.command,
            &self.cwd,
            Duration::from_secs(seconds),
            OUTPUT_CAP,
            &self.sandbox,
            jail,
        )
        .await
        {
            Ok(run) => run,
            Err(error) => {
                tracing::error!(error = %error, "Shell command could not be started.");
                return ToolOutput::error(format!("Error: could not run the command: {error}"));
            }
        };
        let exit_code = run.status.and_then(|status| status.code());
        tracing::info!(
            exit_code,
            timed_out = run.timed_out,
            output_bytes = run.total_bytes,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "Shell command finished."
        );
        let mut output = run.output;
        // What the command printed is text from outside (a file it read, a page it fetched):
        // fenced like any, while the exit code and squidbot's own notes stay outside the fence
        // so the model still reads them as instructions.
        output = if output.is_empty() {
            "(no output)".to_owned()
        } else {
            untrusted::fence("shell", &output)
        };
        if !run.drained {
            output.push_str(
                "\n[stopped reading: a process that left the process group still holds the output open]",
            );
        }
        let failed = run.timed_out || !run.status.is_some_and(|status| status.success());
        if failed && jail == Jail::ReadOnly && self.sandbox.is_enforced() {
            output.push_str(READ_ONLY_NOTE);
        }
        if run.timed_out {
            return ToolOutput::error(format!(
                "Error: the command timed out after {seconds}s; its process group was killed.\n{output}"
            ));
        }
        match run.status {
            Some(status) if status.success() => ToolOutput::ok(format!("exit code 0\n{output}")),
            Some(status) => match (status.code(), status.signal()) {
                (Some(code), _) => ToolOutput::error(format!("Error: exit code {code}\n{output}")),
                (None, Some(signal)) => {
                    ToolOutput::error(format!("Error: killed by signal {signal}\n{output}"))
                }
                (None, None) => ToolOutput::error(format!("Error: {status}\n{output}")),
            },
            None => ToolOutput::error(format!("Error: the exit status is unknown.\n{output}")),
        }
    }
}

/// The outcome of one command.
#[derive(Debug)]
pub(crate) struct Run {
    /// The combined output, capped.
    pub output: String,
    /// Bytes the command wrote in all.
    pub total_bytes: usize,
    /// How the command ended (`None` only if it could not be reaped).
    pub status: Option<ExitStatus>,
    /// Whether the timeout killed it.
    pub timed_out: bool,
    /// Whether the output was read to its end.
    pub drained: bool,
}

/// Ends a command's processes: a jailed command's watcher gets `SIGTERM` (it kills the
/// command's whole domain, then exits); an unconfined command's process group gets `SIGKILL`.
/// While armed, dropping it does that, on every path out of [`run`] (including cancellation).
struct Stop {
    /// The process we started: the watcher, or the shell leading its group.
    pid: libc::pid_t,
    /// Whether `pid` is a watcher.
    watched: bool,
    /// Whether dropping it stops the command.
    armed: bool,
}

impl Stop {
    /// Stops the command the way its kind wants (see the type). Only while `pid` is not reaped
    /// (or, for a group, has a living member), so the pid is not another process's.
    fn signal(&self) {
        if self.pid <= 1 {
            return;
        }
        if self.watched {
            // SAFETY: kill takes plain integers and touches no memory of ours.
            let _ = unsafe { libc::kill(self.pid, libc::SIGTERM) };
        } else {
            self.kill_group();
        }
    }

    /// Kills the whole group, a watcher too: the last resort when a watcher did not end.
    fn kill_group(&self) {
        if self.pid > 1 {
            // SAFETY: killpg takes plain integers and touches no memory of ours. The group id is
            // the pid of the leader we started; while any member lives the id cannot be reused.
            let _ = unsafe { libc::killpg(self.pid, libc::SIGKILL) };
        }
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        if self.armed {
            self.signal();
        }
    }
}

/// Runs `command` with bash in `cwd` inside `sandbox`'s `jail`, killing its process group at
/// `timeout` and when it ends.
pub(crate) async fn run(
    command: &str,
    cwd: &Path,
    timeout: Duration,
    cap: usize,
    sandbox: &Sandbox,
    jail: Jail,
) -> std::io::Result<Run> {
    let (reader, writer) = std::io::pipe()?;
    let writer_err = writer.try_clone()?;
    let mut cmd = tokio::process::Command::new("bash");
    cmd.args(["--noprofile", "--norc", "-c"])
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer_err)
        .process_group(0);
    // Held until the end: the command's TMPDIR is removed when it is dropped.
    let sandboxed = sandbox
        .prepare(&mut cmd, jail)
        .map_err(std::io::Error::other)?;
    // A watcher must not be killed before it has stopped the command (see `Stop`).
    let watched = sandboxed.is_watched();
    cmd.kill_on_drop(!watched);
    let spawned = cmd.spawn().map_err(|error| {
        if sandbox.is_enforced() {
            std::io::Error::new(
                error.kind(),
                format!("starting it in its jail failed: {error}"),
            )
        } else {
            error
        }
    });
    // Dropping the command closes our copies of the pipe's write end, so EOF can come.
    drop(cmd);
    let mut child = spawned?;
    let mut stop = child
        .id()
        .and_then(|pid| libc::pid_t::try_from(pid).ok())
        .map(|pid| Stop {
            pid,
            watched,
            armed: true,
        });
    let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?;
    let mut capture = HeadTail::new(cap);
    let mut buf = vec![0u8; 8192];
    let mut eof = false;
    let mut status = None;
    let mut timed_out = false;
    let deadline = Instant::now() + timeout;
    while status.is_none() {
        tokio::select! {
            read = pipe.read(&mut buf), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => capture.push(&buf[..n]),
            },
            waited = child.wait() => status = Some(waited?),
            () = tokio::time::sleep_until(deadline) => {
                timed_out = true;
                break;
            }
        }
    }
    if let Some(stop) = &mut stop {
        // A reaped watcher ended everything before it exited, and its pid may be reused; else
        // stop the command (timeout) or its background children (unconfined).
        if !(watched && status.is_some()) {
            stop.signal();
        }
        stop.armed = false;
    }
    if timed_out {
        status = tokio::time::timeout(DRAIN_GRACE, child.wait())
            .await
            .ok()
            .and_then(Result::ok);
        if status.is_none()
            && let Some(stop) = &stop
        {
            stop.kill_group();
        }
    }
    let drain_deadline = Instant::now() + DRAIN_GRACE;
    while !eof {
        match tokio::time::timeout_at(drain_deadline, pipe.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => eof = true,
            Ok(Ok(n)) => capture.push(&buf[..n]),
            Err(_) => break,
        }
    }
    Ok(Run {
        total_bytes: capture.total,
        output: capture.render(),
        status,
        timed_out,
        drained: eof,
    })
}

/// The first and last bytes of a stream, with the count of everything.
struct HeadTail {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    half: usize,
    total: usize,
}

impl HeadTail {
    fn new(cap: usize) -> Self {
        let half = cap / 2;
        Self {
            head: Vec::with_capacity(half.min(64 * 1024)),
            tail: VecDeque::new(),
            half,
            total: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let room = self.half.saturating_sub(self.head.len());
        let (first, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(first);
        bytes = rest;
        if bytes.len() >= self.half {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.half..]);
        } else {
            self.tail.extend(bytes);
            let excess = self.tail.len().saturating_sub(self.half);
            self.tail.drain(..excess);
        }
    }

    fn render(&self) -> String {
        let head = String::from_utf8_lossy(&self.head);
        let (front, back) = self.tail.as_slices();
        let tail = String::from_utf8_lossy(&[front, back].concat()).into_owned();
        let cut = self.total - self.head.len() - self.tail.len();
        if cut == 0 {
            // Nothing was dropped, so head and tail are adjacent; decode them together so a
            // character split between them survives.
            let mut all = self.head.clone();
            all.extend(self.tail.iter());
            return String::from_utf8_lossy(&all).into_owned();
        }
        format!("{head}\n[... {cut} bytes cut ...]\n{tail}")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::ports::tool::Tool;
    use crate::core::session::SessionId;
    use serde_json::json;

    async fn shell(command: &str, timeout: Option<u64>) -> ToolOutput {
        let dir = tempfile::tempdir().unwrap();
        let tool =
            ShellTool::new(dir.path(), 30).with_approval(AllowList::default(), ApprovalMode::Off);
        let context = ToolContext::for_test();
        let mut arguments = json!({"command": command});
        if let Some(timeout) = timeout {
            arguments["timeout"] = json!(timeout);
        }
        tool.call(arguments, &context).await
    }

    /// Whether `pid` is still a live process (a zombie waiting for its reaper counts as dead).
    pub(crate) fn alive(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
            Err(_) => false,
        }
    }

    pub(crate) async fn assert_all_dead(pids: &[u32]) {
        for _ in 0..40 {
            if pids.iter().all(|&pid| !alive(pid)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let survivors: Vec<_> = pids.iter().filter(|&&pid| alive(pid)).collect();
        panic!("processes survived: {survivors:?}");
    }

    pub(crate) fn pids(text: &str) -> Vec<u32> {
        text.lines()
            .filter_map(|line| line.strip_prefix("PID "))
            .map(|pid| pid.trim().parse().unwrap())
            .collect()
    }

    #[tokio::test]
    async fn runs_in_the_workspace_and_reports_the_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("marker.txt"), "").unwrap();
        let tool =
            ShellTool::new(dir.path(), 30).with_approval(AllowList::default(), ApprovalMode::Off);
        let context = ToolContext::for_test();
        let out = tool.call(json!({"command": "ls"}), &context).await;
        assert!(!out.is_error, "{out:?}");
        assert_eq!(unfenced(&out.content), "exit code 0\nmarker.txt\n");
        let out = shell("echo out; echo err >&2; exit 3", None).await;
        assert!(out.is_error);
        assert_eq!(unfenced(&out.content), "Error: exit code 3\nout\nerr\n");
        let out = shell("true", None).await;
        assert_eq!(out, ToolOutput::ok("exit code 0\n(no output)"));
        let out = shell("kill -9 $$", None).await;
        assert!(
            out.is_error && out.content.contains("killed by signal 9"),
            "{out:?}"
        );
        let out = shell("", None).await;
        assert!(out.is_error && out.content.contains("empty"), "{out:?}");
        let out = shell("true", Some(0)).await;
        assert!(!out.is_error, "a zero timeout is raised to 1 s: {out:?}");
    }

    #[tokio::test]
    async fn output_cap_keeps_head_and_tail() {
        let out = shell(
            "printf START; head -c 50000 /dev/zero | tr '\\0' a; printf 'END\\n'",
            None,
        )
        .await;
        assert!(!out.is_error, "{out:?}");
        let content = unfenced(&out.content);
        assert!(
            content.starts_with("exit code 0\nSTARTaaa"),
            "{}",
            &content[..40]
        );
        assert!(
            content.ends_with("aaaEND\n"),
            "{}",
            &content[content.len() - 40..]
        );
        let cut = 5 + 50_000 + 4 - OUTPUT_CAP;
        assert!(
            out.content
                .contains(&format!("\n[... {cut} bytes cut ...]\n"))
        );
        assert!(
            out.content.len() < OUTPUT_CAP + 200,
            "{}",
            out.content.len()
        );
        // Output, fence and exit code fit the turn's result cap, whole.
        assert!(out.content.len() < crate::core::agent_loop::DEFAULT_TOOL_RESULT_CAP);
        assert!(
            out.content.contains("\n</untrusted-data boundary="),
            "{}",
            &out.content[out.content.len() - 80..]
        );
    }

    /// `content` without the lines of the fence around the command's output.
    fn unfenced(content: &str) -> String {
        let mut kept: Vec<&str> = content
            .split('\n')
            .filter(|line| {
                !line.starts_with("<untrusted-data ") && !line.starts_with("</untrusted-data ")
            })
            .collect();
        // The fence closes on a line of its own after the output's last newline.
        if content.ends_with('>') {
            kept.push("");
        }
        kept.join("\n")
    }

    #[test]
    fn head_tail_across_many_pushes() {
        let mut capture = HeadTail::new(8);
        for chunk in [&b"ab"[..], b"cdef", b"ghij", b"k", b"lmnop"] {
            capture.push(chunk);
        }
        assert_eq!(capture.render(), "abcd\n[... 8 bytes cut ...]\nmnop");
        let mut capture = HeadTail::new(8);
        capture.push("héllo".as_bytes());
        assert_eq!(capture.render(), "héllo");
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_process_tree() {
        let started = Instant::now();
        let out = shell(
            "echo PID $$; sleep 100 & echo PID $!; \
             sh -c 'sleep 101 & echo PID $!; wait' & echo PID $!; wait",
            Some(1),
        )
        .await;
        assert!(out.is_error, "{out:?}");
        assert!(out.content.contains("timed out after 1s"), "{out:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let pids = pids(&out.content);
        assert_eq!(pids.len(), 4, "{out:?}");
        assert_all_dead(&pids).await;
    }

    #[tokio::test]
    async fn background_children_die_when_the_command_ends() {
        let started = Instant::now();
        let out = shell("sleep 100 & echo PID $!; echo done", None).await;
        assert!(!out.is_error, "{out:?}");
        assert!(out.content.contains("done"));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_all_dead(&pids(&out.content)).await;
    }

    #[tokio::test]
    async fn an_escaped_process_does_not_hang_the_call() {
        if std::process::Command::new("setsid")
            .arg("--version")
            .output()
            .is_err()
        {
            return;
        }
        let started = Instant::now();
        let out = shell("setsid sleep 3 & echo started", None).await;
        assert!(started.elapsed() < Duration::from_secs(3) + DRAIN_GRACE);
        assert!(out.content.contains("started"), "{out:?}");
    }

    #[tokio::test]
    async fn a_shared_turn_asks_for_every_command_and_nothing_runs_unasked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("MEMORY.md"), "- the PIN is 4711\n").unwrap();
        let tool = ShellTool::new(dir.path(), 30);
        let mut context = ToolContext::for_test()
            .with_session(SessionId::new("matrix", "!group:example.org").unwrap())
            .with_audience(crate::core::audience::Audience::Shared);
        // `cat` is on the allow list, but others read this turn: with no one to ask, refused.
        let out = tool
            .call(json!({"command": "cat MEMORY.md"}), &context)
            .await;
        assert!(out.is_error && !out.content.contains("4711"), "{out:?}");
        context.audience = crate::core::audience::Audience::Owner;
        let out = tool
            .call(json!({"command": "cat MEMORY.md"}), &context)
            .await;
        assert!(out.content.contains("4711"), "{out:?}");
    }
}
