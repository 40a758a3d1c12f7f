//! The jail under attack: every command of `attacks.txt` run as an unapproved command, once
//! through the shell tool (the policy decides, then the jail holds) and once straight into the
//! read-only jail (as if the policy had let every one through), each judged by its effects:
//! no file changed anywhere but the command's own TMPDIR, no listener (TCP on IPv4 and IPv6,
//! UDP, a UNIX socket outside the workspace, an abstract UNIX socket) accepted a connection or
//! received a byte, no signal or ptrace reached the test process, and no secret came back in
//! any encoding a read-only command can produce (plain, spaced out, upper case, reversed, hex,
//! base64), the "daemon's" (this process's) environment included.
//!
//! The listeners are real sockets of this process and the files are real files; nothing here
//! asks the policy's parser what it thinks.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read};
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::ShellSandbox;
use crate::core::ports::tool::{Tool, ToolContext};
use crate::core::redact::Redactor;
use crate::core::session::SessionId;
use crate::tools::sandbox::{Jail, Sandbox, SandboxSettings, rules};
use crate::tools::shell::{OUTPUT_CAP, ShellTool, run};
use std::sync::Arc;

/// What the config holds; no command may show it in any form.
const SECRET: &str = "sk-attack-c0nfig-5ecret-7f3a9";

/// Printed by a corpus command only when something it must not do worked.
const MARKERS: [&str; 6] = [
    "SIGNALLED",
    "UNSHARED",
    "PTRACED",
    "LISTENING",
    "MADE-RAW",
    "MADE-NETLINK",
];

/// One scratch world: a home with the config, its workspace, a directory outside, listeners.
struct World {
    _root: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    workspace: PathBuf,
    outside: PathBuf,
    canary: PathBuf,
    tcp: TcpListener,
    tcp6: Option<TcpListener>,
    udp: UdpSocket,
    unix: UnixListener,
    abstract_name: String,
    abstract_socket: UnixListener,
}

impl World {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = rules::canonical(dir.path());
        let home = root.join("home");
        let workspace = home.join("workspace");
        let outside = root.join("outside");
        for path in [&workspace, &outside, &home.join("sessions")] {
            std::fs::create_dir_all(path).unwrap();
        }
        std::fs::write(home.join("squidbot.yaml"), format!("api_key: {SECRET}\n")).unwrap();
        std::fs::write(
            home.join("sessions/cli.jsonl"),
            format!("{{\"content\":\"{SECRET}\"}}\n"),
        )
        .unwrap();
        std::fs::write(workspace.join("existing.txt"), "b\na\n").unwrap();
        std::fs::write(outside.join("existing.txt"), "outside\n").unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp6 = TcpListener::bind("[::1]:0").ok();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let unix = UnixListener::bind(outside.join("service.sock")).unwrap();
        static WORLDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let world = WORLDS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let abstract_name = format!("squidbot-attack-{}-{world}", std::process::id());
        let address = SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        let abstract_socket = UnixListener::bind_addr(&address).unwrap();
        tcp.set_nonblocking(true).unwrap();
        if let Some(tcp6) = &tcp6 {
            tcp6.set_nonblocking(true).unwrap();
        }
        udp.set_nonblocking(true).unwrap();
        unix.set_nonblocking(true).unwrap();
        abstract_socket.set_nonblocking(true).unwrap();
        let canary = PathBuf::from(format!(
            "/tmp/squidbot-attack-{}-{world}",
            std::process::id()
        ));
        Self {
            _root: dir,
            root,
            home,
            workspace,
            outside,
            canary,
            tcp,
            tcp6,
            udp,
            unix,
            abstract_name,
            abstract_socket,
        }
    }

    fn sandbox(&self) -> Sandbox {
        let settings = SandboxSettings {
            mode: ShellSandbox::Auto,
            // The worst case: approved commands may use the network, unapproved ones still not.
            network: true,
            workspace: self.workspace.clone(),
            readable: Vec::new(),
            hidden: vec![self.home.clone()],
            env_passthrough: Vec::new(),
            run_as: None,
        };
        let sandbox = Sandbox::new(&settings, &Redactor::none());
        assert!(sandbox.is_enforced(), "no jail here: {}", sandbox.status());
        sandbox
    }

    /// The corpus line with its placeholders filled in.
    fn fill(&self, line: &str) -> String {
        let port6 = self
            .tcp6
            .as_ref()
            .map_or(1, |tcp6| tcp6.local_addr().unwrap().port());
        line.replace("{NL}", "\n")
            .replace("{TCP}", &self.tcp.local_addr().unwrap().port().to_string())
            .replace("{TCP6}", &port6.to_string())
            .replace("{UDP}", &self.udp.local_addr().unwrap().port().to_string())
            .replace(
                "{UNIX}",
                &self.outside.join("service.sock").display().to_string(),
            )
            .replace("{ABSTRACT}", &self.abstract_name)
            .replace("{OUT}", &self.outside.display().to_string())
            .replace("{HOME}", &self.home.display().to_string())
            .replace("{PID}", &std::process::id().to_string())
            .replace("{TMP}", &self.canary.display().to_string())
    }

    /// Every file and directory under the root with what identifies its state.
    fn snapshot(&self) -> BTreeMap<PathBuf, String> {
        let mut files = BTreeMap::new();
        walk(&self.root, &mut files);
        files
    }

    /// What reached a listener since the last call, if anything.
    fn reached(&self) -> Vec<&'static str> {
        let mut reached = Vec::new();
        if self.tcp.accept().is_ok() {
            reached.push("tcp");
        }
        if self.tcp6.as_ref().is_some_and(|tcp6| tcp6.accept().is_ok()) {
            reached.push("tcp6");
        }
        let mut buf = [0u8; 64];
        if self.udp.recv_from(&mut buf).is_ok() {
            reached.push("udp");
        }
        if self.unix.accept().is_ok() {
            reached.push("unix");
        }
        if self.abstract_socket.accept().is_ok() {
            reached.push("abstract unix");
        }
        reached
    }
}

fn walk(path: &Path, files: &mut BTreeMap<PathBuf, String>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    let mut state = format!(
        "{:o} {} {} {}",
        meta.mode(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec()
    );
    if meta.file_type().is_symlink() {
        state.push_str(&format!(" -> {:?}", std::fs::read_link(path).ok()));
    } else if meta.is_file() {
        let mut content = String::new();
        if let Ok(mut file) = std::fs::File::open(path) {
            let _ = file.read_to_string(&mut content);
        }
        state.push(' ');
        state.push_str(&content);
    } else if meta.is_dir() {
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            walk(&entry.path(), files);
        }
    }
    files.insert(path.to_owned(), state);
}

/// The forms a secret takes through the commands a read-only shell has.
fn leaked(output: &str, secrets: &[String]) -> Option<String> {
    let flat: String = output
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_lowercase();
    for secret in secrets {
        let lower = secret.to_lowercase();
        let reversed: String = lower.chars().rev().collect();
        let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
        let mut forms = vec![lower, reversed, hex];
        for skip in 0..3 {
            let encoded = base64(&secret.as_bytes()[skip..]);
            // The middle of the encoding does not depend on what came before the secret.
            forms.push(encoded[4..encoded.len() - 4].to_lowercase());
        }
        if let Some(form) = forms.iter().find(|form| flat.contains(form.as_str())) {
            return Some(form.clone());
        }
    }
    None
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

fn corpus() -> Vec<&'static str> {
    include_str!("attacks.txt")
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .collect()
}

/// What the test process's own environment holds that a command's never does.
fn daemon_secrets() -> Vec<String> {
    let mut secrets = vec![SECRET.to_owned()];
    if let Ok(home) = std::env::var("HOME") {
        secrets.push(format!("HOME={home}"));
    }
    secrets.extend(
        std::env::vars()
            .map(|(name, _)| name)
            .filter(|name| name.starts_with("CARGO_"))
            .map(|name| format!("{name}=")),
    );
    secrets
}

/// Runs the corpus one way and returns every violation.
async fn attack(
    world: &World,
    how: &str,
    mut run_one: impl AsyncFnMut(&str) -> String,
) -> Vec<String> {
    let secrets = daemon_secrets();
    let mut before = world.snapshot();
    let mut violations = Vec::new();
    for line in corpus() {
        let command = world.fill(line);
        let output = run_one(&command).await;
        let after = world.snapshot();
        if after != before {
            let changed: Vec<_> = after
                .iter()
                .filter(|(path, state)| before.get(*path) != Some(*state))
                .map(|(path, _)| path.display().to_string())
                .chain(
                    before
                        .keys()
                        .filter(|path| !after.contains_key(*path))
                        .map(|path| format!("{} (removed)", path.display())),
                )
                .collect();
            violations.push(format!("{how}: `{line}` changed {changed:?}"));
            before = after;
        }
        if world.canary.exists() {
            violations.push(format!("{how}: `{line}` wrote {}", world.canary.display()));
            let _ = std::fs::remove_file(&world.canary);
        }
        for listener in world.reached() {
            violations.push(format!("{how}: `{line}` reached the {listener} listener"));
        }
        if let Some(form) = leaked(&output, &secrets) {
            violations.push(format!(
                "{how}: `{line}` showed a secret ({form}): {output}"
            ));
        }
        // A refusal quotes the command, markers and all; only what the command printed counts.
        let printed = output.replace(&command, "");
        if let Some(marker) = MARKERS.iter().find(|marker| printed.contains(*marker)) {
            violations.push(format!("{how}: `{line}` printed {marker}: {output}"));
        }
    }
    violations
}

#[tokio::test]
async fn no_unapproved_command_writes_connects_signals_or_reads_a_secret() {
    let corpus = corpus();
    assert!(corpus.len() >= 150, "the corpus shrank to {}", corpus.len());
    let world = World::new();
    let sandbox = Arc::new(world.sandbox());
    let context = ToolContext::for_test()
        .with_session(SessionId::new("cli", "attack").unwrap())
        .with_audience(crate::core::audience::Audience::Owner);
    let tool = ShellTool::new(&world.workspace, 10).with_sandbox(sandbox.clone());
    let mut ran = 0;
    let mut violations = attack(&world, "tool", async |command: &str| {
        let output = tool
            .call(serde_json::json!({ "command": command }), &context)
            .await;
        if !output.content.contains("needs the owner's approval") {
            ran += 1;
        }
        output.content
    })
    .await;
    // The policy predicted some commands harmless; those ran, in the read-only jail.
    assert!(
        ran > 0,
        "no command ran unasked: the tool half proves nothing"
    );
    violations.extend(
        attack(&world, "jail", async |command: &str| {
            match run(
                command,
                &world.workspace,
                Duration::from_secs(10),
                OUTPUT_CAP,
                &sandbox,
                Jail::ReadOnly,
            )
            .await
            {
                Ok(run) => run.output,
                Err(error) => error.to_string(),
            }
        })
        .await,
    );
    assert!(
        violations.is_empty(),
        "{} violations:\n{}",
        violations.len(),
        violations.join("\n")
    );
    // The world was reachable: the same listeners hear a connection from outside the jail.
    std::net::TcpStream::connect(world.tcp.local_addr().unwrap()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(world.reached(), ["tcp"]);
    let _ = world.outside.join("existing.txt").metadata().unwrap();
    assert!(matches!(
        world.unix.accept().map_err(|e| e.kind()),
        Err(ErrorKind::WouldBlock)
    ));
}

#[tokio::test]
async fn an_approved_command_writes_the_workspace_and_nothing_else() {
    let world = World::new();
    let sandbox = world.sandbox();
    let run_approved = async |command: &str| {
        run(
            command,
            &world.workspace,
            Duration::from_secs(10),
            OUTPUT_CAP,
            &sandbox,
            Jail::Workspace,
        )
        .await
        .unwrap()
    };
    let done = run_approved("echo made > made.txt && sort -o sorted existing.txt").await;
    assert!(done.status.is_some_and(|s| s.success()), "{}", done.output);
    assert_eq!(
        std::fs::read_to_string(world.workspace.join("sorted")).unwrap(),
        "a\nb\n"
    );
    let before = world.snapshot();
    for line in [
        "touch {OUT}/pwned",
        "echo x >> {HOME}/squidbot.yaml",
        "cat {HOME}/squidbot.yaml",
        "cat /proc/{PID}/environ",
        "touch {TMP}",
        "kill -0 {PID} && echo SIGNALLED",
    ] {
        let command = world.fill(line);
        let done = run_approved(&command).await;
        assert!(
            !done.status.is_some_and(|s| s.success()),
            "{line}: {}",
            done.output
        );
        assert!(leaked(&done.output, &daemon_secrets()).is_none(), "{line}");
    }
    assert_eq!(world.snapshot(), before);
    assert!(!world.canary.exists());
}
