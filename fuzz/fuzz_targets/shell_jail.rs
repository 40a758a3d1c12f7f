//! Fuzzes the shell's boundary (#23): generated command lines go through the real `shell`
//! tool as unapproved commands (no one to ask), so whatever the allow list lets run unasked
//! runs in the read-only jail. Each input is judged by its effects, never by the policy's
//! opinion: no file under the scratch root changed (the home with its secret config, the
//! workspace, a directory outside), no loopback TCP, UDP or UNIX listener heard anything, and
//! the secret did not come back in the output (plain, spaced, hex or reversed).
//!
//! Inputs are read as a sequence of fragments (one byte picks one from `FRAGMENTS`; a byte with
//! the high bit set is a literal character), so the fuzzer builds shell-shaped lines: wrappers,
//! GNU options, substitutions, here-documents, quoting and redirections, aimed at the files and
//! sockets of the scratch world.
#![no_main]

use std::collections::BTreeMap;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use squidbot::config::ShellSandbox;
use squidbot::core::audience::Audience;
use squidbot::core::authority::Authority;
use squidbot::core::ports::tool::{Tool, ToolContext};
use squidbot::core::redact::Redactor;
use squidbot::core::session::SessionId;
use squidbot::tools::ShellTool;
use squidbot::tools::sandbox::{Sandbox, SandboxSettings};

const SECRET: &str = "sk-fuzz-5ecret-c0nfig-9d2e";

const FRAGMENTS: &[&str] = &[
    "ls", "cat", "sort", "uniq", "find", "xargs", "env", "sh -c", "bash -c", "command", "eval",
    "echo", "printf", "head", "tail", "od -c", "tr a-z A-Z", "cut -c1-", "grep -r .", "timeout 2",
    "nice", "stdbuf -o0", "tee", "touch", "rm -f", "mv", "cp", "python3 -c", "-o", "--out=",
    "-uo", "--compress-program=sh", "-exec", "-delete", "-fprint", "-I{}", "-i", "-e", "-l",
    " ", " ", " ", "|", ";", "&&", "||", "&", "$(", ")", "`", "'", "\"", "\\", "$'\\x74'", "#",
    "\n", "<<EOF\n", "\nEOF\n", "<<'E'\n", "{", "}", "(", ")", ">", ">>", "<", "2>&1", "*", "?",
    "pwned", "existing.txt", "../squidbot.yaml", "OUT/x", "HOME/squidbot.yaml",
    "/dev/tcp/127.0.0.1/TCP", "/dev/udp/127.0.0.1/UDP", "UNIX", "$PPID", "/proc/$PPID/environ",
    "kill -9", "$TMPDIR", "~", "..", ".", "import socket;s=socket.socket();s.connect(('127.0.0.1',TCP))",
];

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    outside: PathBuf,
    tcp: TcpListener,
    udp: UdpSocket,
    unix: UnixListener,
    tool: ShellTool,
    runtime: tokio::runtime::Runtime,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        let workspace = home.join("workspace");
        let outside = root.join("outside");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(home.join("squidbot.yaml"), format!("api_key: {SECRET}\n")).unwrap();
        std::fs::write(workspace.join("existing.txt"), "b\na\n").unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let unix = UnixListener::bind(outside.join("service.sock")).unwrap();
        tcp.set_nonblocking(true).unwrap();
        udp.set_nonblocking(true).unwrap();
        unix.set_nonblocking(true).unwrap();
        let settings = SandboxSettings {
            mode: ShellSandbox::Auto,
            network: true,
            workspace: workspace.clone(),
            readable: Vec::new(),
            hidden: vec![home.clone()],
            env_passthrough: Vec::new(),
            run_as: None,
        };
        let sandbox = Sandbox::new(&settings, &Redactor::none());
        assert!(sandbox.is_enforced(), "no jail here: {}", sandbox.status());
        let tool = ShellTool::new(&workspace, 2).with_sandbox(Arc::new(sandbox));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        World { _dir: dir, root, home, outside, tcp, udp, unix, tool, runtime }
    })
}

fn snapshot(path: &Path, out: &mut BTreeMap<PathBuf, String>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return };
    let mut state = format!("{:o} {} {} {}", meta.mode(), meta.len(), meta.mtime(), meta.mtime_nsec());
    if meta.is_file() {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(path) {
            let _ = file.read_to_string(&mut text);
        }
        state.push_str(&text);
    } else if meta.is_dir() {
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            snapshot(&entry.path(), out);
        }
    }
    out.insert(path.to_owned(), state);
}

fn command_of(data: &[u8], world: &World) -> String {
    let mut line = String::new();
    for &byte in data.iter().take(64) {
        if byte & 0x80 != 0 {
            line.push(char::from(byte & 0x7f));
        } else {
            line.push_str(FRAGMENTS[usize::from(byte) % FRAGMENTS.len()]);
        }
    }
    line.replace("TCP", &world.tcp.local_addr().unwrap().port().to_string())
        .replace("UDP", &world.udp.local_addr().unwrap().port().to_string())
        .replace("UNIX", &world.outside.join("service.sock").display().to_string())
        .replace("OUT", &world.outside.display().to_string())
        .replace("HOME", &world.home.display().to_string())
}

fuzz_target!(|data: &[u8]| {
    let world = world();
    let command = command_of(data, world);
    if command.trim().is_empty() {
        return;
    }
    let mut before = BTreeMap::new();
    snapshot(&world.root, &mut before);
    let context = ToolContext {
        session: SessionId::new("cli", "fuzz").unwrap(),
        metadata: Default::default(),
        prompt_tail: None,
        approvals: None,
        audience: Audience::Owner,
        authority: Authority::Owner,
    };
    let output = world.runtime.block_on(
        world.tool.call(serde_json::json!({ "command": command }), &context),
    );
    let mut after = BTreeMap::new();
    snapshot(&world.root, &mut after);
    assert!(before == after, "`{command}` changed files: {output:?}");
    assert!(world.tcp.accept().is_err(), "`{command}` reached the TCP listener");
    assert!(world.unix.accept().is_err(), "`{command}` reached the UNIX listener");
    let mut buf = [0u8; 16];
    assert!(world.udp.recv_from(&mut buf).is_err(), "`{command}` reached the UDP listener");
    let flat: String = output.content.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_lowercase();
    let hex: String = SECRET.bytes().map(|b| format!("{b:02x}")).collect();
    let reversed: String = SECRET.chars().rev().collect();
    for form in [SECRET.to_lowercase(), hex, reversed] {
        assert!(!flat.contains(&form), "`{command}` showed the secret: {}", output.content);
    }
});
