//! Fail closed (#23 item 6): where the jail cannot be built the shell tool is off and says
//! why, in `status`, in `doctor` and in the tool's result, and no command runs, with
//! approvals off too (so nothing but the jail is tested). The jail's absence is simulated the
//! way an old or locked-down kernel presents it: every Landlock system call answers `ENOSYS`,
//! through a seccomp filter installed on the `squidbot` process before it starts.

use std::process::Output;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

use crate::cli::Home;
use crate::support::bin::stderr;
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
