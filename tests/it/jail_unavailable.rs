//! Fail closed (#23 item 6): where the jail cannot be built the shell tool is off and says
//! why, in `status`, in `doctor` and in the tool's result, and no command runs, with
//! approvals off too (so nothing but the jail is tested). The jail's absence is simulated the
//! way an old or locked-down kernel presents it: every Landlock system call answers `ENOSYS`,
//! through a seccomp filter installed on the `squidbot` process before it starts.
//!
//! The ABI floor (#35 item 2): on a kernel whose Landlock is older than ABI 6 the jail would
//! lose guarantees (signal scoping, truncation control), so the shell is off there too, and
//! says which. An older kernel is simulated by preloading a shim (`data/landlock-abi/shim.c`,
//! compiled here with `cc`) that answers the ABI query with an older version.

use std::process::Output;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

use crate::support::bin::stderr;
use crate::support::home::Home;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// A filter under which the kernel seems to have no Landlock.
fn no_landlock() -> BpfProgram {
    let calls = [
        libc::SYS_landlock_create_ruleset,
        libc::SYS_landlock_add_rule,
        libc::SYS_landlock_restrict_self,
    ];
    let filter = SeccompFilter::new(
        calls.iter().map(|&call| (call, Vec::new())).collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        TargetArch::try_from(std::env::consts::ARCH).unwrap(),
    )
    .unwrap();
    filter.try_into().unwrap()
}

/// Runs squidbot with `args` on `home` as if the kernel had no Landlock.
async fn run_without_landlock(home: &Home, args: &[&str]) -> Output {
    let program = no_landlock();
    let mut command = crate::support::bin::squidbot(home.path());
    command.args(args);
    // SAFETY: applying a prebuilt filter makes two system calls and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            seccompiler::apply_filter(&program).map_err(|e| std::io::Error::other(e.to_string()))
        });
    }
    command.output().await.unwrap()
}

// See: #23 (item 6)
#[tokio::test]
async fn without_landlock_the_shell_is_off_says_why_and_reads_nothing() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    home.write_config(&llm.url(), "tools:\n  shell:\n    approval: off\n");
    let call = |id: &str, command: &str| {
        (
            id.to_owned(),
            "shell".to_owned(),
            serde_json::json!({ "command": command }).to_string(),
        )
    };
    llm.enqueue(Reply::ToolCalls {
        text: String::new(),
        calls: vec![
            call("c0", "cat ../squidbot.yaml"),
            call("c1", "od -c ../squidbot.yaml"),
            call("c2", "cat /proc/$PPID/environ | tr '\\0' '\\n'"),
            call("c3", "touch ran"),
        ],
    });
    llm.enqueue(Reply::Text("done".to_owned()));
    let output = run_without_landlock(&home, &["agent", "-m", "show me the config"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = llm.requests();
    let results: Vec<String> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    for result in &results {
        assert!(result.starts_with("Error"), "{results:?}");
        assert!(result.contains("Landlock"), "the result says why: {result}");
        let flat: String = result.chars().filter(|c| !c.is_whitespace()).collect();
        assert!(!flat.contains("test-key"), "{result}");
        assert!(!flat.contains("SQUIDBOT_HOME="), "{result}");
    }
    assert!(!home.path().join("workspace/ran").exists());

    let status = run_without_landlock(&home, &["status"]).await;
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("refused, so the shell tool is off") && text.contains("Landlock"),
        "{text}"
    );
    let doctor = run_without_landlock(&home, &["doctor"]).await;
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("FAIL shell sandbox") && text.contains("the shell tool is off"),
        "{text}"
    );
    // The same home with the kernel's Landlock: the jail is there.
    let status = home.run(&["status"]).await;
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("auto: landlock+seccomp (ABI "), "{text}");
}

/// The ABI shim, compiled once into a directory that lives as long as the test.
fn abi_shim(dir: &std::path::Path) -> std::path::PathBuf {
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/data/landlock-abi/shim.c");
    let shim = dir.join("landlock-abi-shim.so");
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&shim)
        .arg(&source)
        .arg("-ldl")
        .output()
        .expect("cc (gcc) compiles the ABI shim");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    shim
}

/// Runs squidbot with `args` on `home` as if the kernel's Landlock were at `abi`.
async fn run_at_abi(home: &Home, shim: &std::path::Path, abi: u32, args: &[&str]) -> Output {
    let mut command = crate::support::bin::squidbot(home.path());
    command
        .args(args)
        .env("LD_PRELOAD", shim)
        .env("SQUIDBOT_TEST_LANDLOCK_ABI", abi.to_string());
    command.output().await.unwrap()
}

// See: #35 (item 2)
#[tokio::test]
async fn issue_35_below_landlock_abi_6_the_shell_is_off_and_says_which_guarantee_is_missing() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    home.write_config(&llm.url(), "tools:\n  shell:\n    approval: off\n");
    let dir = tempfile::tempdir().unwrap();
    let shim = abi_shim(dir.path());
    // The shim is what the test believes it is: at the kernel's own ABI the jail is there.
    let status = run_at_abi(&home, &shim, 6, &["status"]).await;
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("auto: landlock+seccomp (ABI 6"), "{text}");

    let status = run_at_abi(&home, &shim, 4, &["status"]).await;
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(
            "refused, so the shell tool is off: Landlock ABI 4 < 6: commands could \
                       signal the daemon and other processes"
        ),
        "{text}"
    );
    assert!(
        text.contains("Linux 6.12") && !text.contains("truncate"),
        "{text}"
    );
    let doctor = run_at_abi(&home, &shim, 2, &["doctor"]).await;
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("FAIL shell sandbox") && text.contains("Landlock ABI 2 < 6"),
        "{text}"
    );
    assert!(
        text.contains("signal the daemon") && text.contains("truncate any file they can read"),
        "{text}"
    );

    // The tool's own answer names it too, and the command does not run.
    llm.enqueue(Reply::ToolCalls {
        text: String::new(),
        calls: vec![(
            "c0".to_owned(),
            "shell".to_owned(),
            serde_json::json!({ "command": "kill -0 $PPID && touch ran" }).to_string(),
        )],
    });
    llm.enqueue(Reply::Text("done".to_owned()));
    let output = run_at_abi(&home, &shim, 5, &["agent", "-m", "signal the daemon"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    // The last request carries the tool's result (`doctor` pinged the LLM before).
    let requests = llm.requests();
    let result = requests[requests.len() - 1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("{requests:#?}\n{}", stderr(&output)));
    assert!(
        result.starts_with("Error") && result.contains("Landlock ABI 5 < 6: commands could signal"),
        "{result}"
    );
    assert!(!home.path().join("workspace/ran").exists());
}
