//! Skills and templates through the binary: `squidbot skills list` (bundled skills, overrides,
//! gating, no skills), `onboard` writing the templates, and the skills in an agent's prompt.

use crate::support::bin::{squidbot, stdout};
use std::path::Path;
use std::process::Output;

use crate::support::config::TestConfig;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn skill(&self, dir: &str, name: &str, frontmatter: &str) {
        let path = self.path().join(dir).join(name);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(
            path.join("SKILL.md"),
            format!("---\n{frontmatter}\n---\nBody.\n"),
        )
        .unwrap();
    }

    async fn run(&self, args: &[&str]) -> Output {
        squidbot(self.path())
            .args(args)
            .env_remove("SQUIDBOT_SKILL_TEST_UNSET")
            .output()
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn lists_bundled_workspace_and_extra_skills_with_gating() {
    let home = Home::new();
    std::fs::write(
        home.path().join("squidbot.yaml"),
        "skills:\n  extra_dirs: [extra]\n",
    )
    .unwrap();
    home.skill(
        "workspace/skills",
        "summarize",
        "description: My own summaries.",
    );
    home.skill(
        "extra",
        "zz-gated",
        "description: Needs things.\nrequires:\n  bins: [squidbot-no-such-bin-4711]\n  env: [SQUIDBOT_SKILL_TEST_UNSET]",
    );
    home.skill("extra", "broken", "description: [unclosed");

    let output = home.run(&["skills", "list"]).await;
    let text = stdout(&output);
    assert!(output.status.success(), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let first = lines.iter().position(|l| l.contains(" cron ")).unwrap();
    assert!(lines[first].starts_with("  + cron "), "{text}");
    assert!(
        text.contains("  + memory        [always]  How your two-level memory works"),
        "{text}"
    );
    assert!(text.contains("summarize      My own summaries."), "{text}");
    assert!(text.contains("  - zz-gated       Needs things."), "{text}");
    assert!(
        text.contains("      missing bins: squidbot-no-such-bin-4711\n      missing env: SQUIDBOT_SKILL_TEST_UNSET\n"),
        "{text}"
    );
    assert!(!text.contains("broken"), "{text}");
    let names: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("  + ") || l.starts_with("  - "))
        .map(|l| l[4..].split_whitespace().next().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert!(home.path().join("bundled-skills/memory/SKILL.md").is_file());
}

#[tokio::test]
async fn with_no_skills_it_says_so() {
    let home = Home::new();
    // A file where the bundled directory would go: the bundled skills cannot be written.
    std::fs::write(home.path().join("bundled-skills"), "").unwrap();
    let output = home.run(&["skills", "list"]).await;
    assert!(output.status.success());
    assert_eq!(stdout(&output), "No skills found.\n");
}

fn system_prompt(request: &serde_json::Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn onboard_templates_and_skills_reach_the_agent_prompt() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("USER.md"), "# User\n- Name: Ada\n").unwrap();
    let url = llm.url();
    let output = home
        .run(&["onboard", "--api-base", &url, "--model", "scripted-model"])
        .await;
    assert!(output.status.success(), "{}", stdout(&output));
    for name in [
        "SOUL.md",
        "IDENTITY.md",
        "AGENTS.md",
        "ENVIRONMENT.md",
        "HEARTBEAT.md",
        "BOOTSTRAP.md",
    ] {
        assert!(workspace.join(name).is_file(), "{name}");
    }
    assert_eq!(
        std::fs::read_to_string(workspace.join("USER.md")).unwrap(),
        "# User\n- Name: Ada\n"
    );

    home.skill("workspace/skills", "mine", "description: First version.");
    assert!(home.run(&["agent", "-m", "hi"]).await.status.success());
    let prompt = system_prompt(&llm.requests()[0]);
    assert!(prompt.contains("- Name: Ada"), "{prompt}");
    assert!(prompt.contains("# First run"), "{prompt}");
    assert!(
        prompt.contains("<skill name=\"mine\" file=\"")
            && prompt.contains("\">First version.</skill>"),
        "{prompt}"
    );
    assert!(prompt.contains("<skill name=\"cron\""), "{prompt}");
    assert!(prompt.contains("## Memory\n\n- **MEMORY.md**"), "{prompt}");
    assert!(!prompt.contains("always: true"), "{prompt}");

    home.skill(
        "workspace/skills",
        "mine",
        "description: Second version, longer.",
    );
    assert!(home.run(&["agent", "-m", "again"]).await.status.success());
    let prompt = system_prompt(&llm.requests()[1]);
    assert!(
        prompt.contains("\">Second version, longer.</skill>"),
        "{prompt}"
    );
}

#[tokio::test]
async fn the_agent_can_read_a_bundled_skill_while_confined_to_the_workspace() {
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    TestConfig::new(&llm.url())
        .agents_line("restrict_to_workspace: true")
        .write(home.path());
    let location = home.path().join("bundled-skills/cron/SKILL.md");
    let args = serde_json::json!({ "path": location }).to_string();
    llm.enqueue(Reply::ToolCalls {
        text: String::new(),
        calls: vec![("c1".to_owned(), "read_file".to_owned(), args)],
    });
    llm.enqueue(Reply::Text("done".to_owned()));
    let output = home.run(&["agent", "-m", "how do I schedule?"]).await;
    assert!(output.status.success(), "{}", stdout(&output));
    let requests = llm.requests();
    let messages = requests[1]["messages"].as_array().unwrap();
    let result = messages.last().unwrap();
    assert_eq!(result["role"], "tool");
    let content = result["content"].as_str().unwrap();
    assert!(content.contains("# Scheduling with cron"), "{content}");
}
