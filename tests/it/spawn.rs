//! spawn with profiles: sub-agents over the scripted LLM, their sessions, tools, prompts,
//! pools, concurrency bound, collection and pruning.

use crate::support::bin::tool_names;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use squidbot::config::{SpawnConfig, SpawnProfile};
use squidbot::core::agent_loop::{AgentLoop, TurnRequest};
use squidbot::core::memory_manager::{MemoryManager, MemorySettings};
use squidbot::core::message::{Message, Role};
use squidbot::core::origin::Origin;
use squidbot::core::ports::channel::CollectingSink;
use squidbot::core::ports::clock::SystemClock;
use squidbot::core::ports::llm::LlmClient;
use squidbot::core::ports::prompt::{FixedPrompt, PromptSections};
use squidbot::core::ports::tool::{Tool, ToolContext, ToolOutput, ToolSpec};
use squidbot::core::session::SessionId;
use squidbot::core::session_locks::SessionLocks;
use squidbot::core::tool_registry::ToolRegistry;
use squidbot::storage::{JsonlStore, MemoryFile, safe_id};
use squidbot::tools::spawn::{SpawnAwaitTool, SpawnHub, SpawnLimits, SpawnTool, SubAgentParts};

use crate::harness::{BASE_PROMPT, scripted_pool, system_text};
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// A tool that only has a name (sub-agents' tool lists are what is checked).
struct NamedTool(ToolSpec);

impl NamedTool {
    fn named(name: &str) -> Arc<dyn Tool> {
        Arc::new(Self(ToolSpec::new(
            name,
            format!("The {name} tool."),
            &json!({"type": "object", "properties": {}}),
        )))
    }
}

#[async_trait]
impl Tool for NamedTool {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn effects(&self) -> squidbot::core::authority::Effects {
        squidbot::core::authority::Effects::NONE
    }

    async fn call(&self, _arguments: Value, _context: &ToolContext) -> ToolOutput {
        ToolOutput::ok(format!("{} ran", self.0.name()))
    }
}

/// A client for the scripted server asking for `model`, without retries.
fn client(url: &str, model: &str) -> Arc<dyn LlmClient> {
    scripted_pool("pool", model, model, url, None)
}

/// A parent agent with `alpha` and `beta` registered, plus spawn and spawn_await over a hub.
struct Setup {
    _dir: tempfile::TempDir,
    home: std::path::PathBuf,
    llm: ScriptedLlm,
    hub: Arc<SpawnHub>,
    agent: AgentLoop,
}

fn profile(system_prompt: &str, tools: &[&str], pool: &str) -> SpawnProfile {
    SpawnProfile {
        system_prompt: system_prompt.to_owned(),
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        pool: pool.to_owned(),
        ..SpawnProfile::default()
    }
}

async fn setup(config: SpawnConfig, limits: SpawnLimits) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_path_buf();
    let workspace = home.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("AGENTS.md"), "Agent rules.").unwrap();
    std::fs::write(workspace.join("RESEARCH.md"), "Research method.").unwrap();
    let llm = ScriptedLlm::start().await;
    // The parent answers "parent done"; sub-agents echo their task.
    llm.set_handler(|request| {
        if system_text(request).starts_with(BASE_PROMPT) {
            return Reply::Text("parent done".to_owned());
        }
        let task = request["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        Reply::Text(format!("did: {task}"))
    });
    let default_llm = client(&llm.url(), "default-model");
    let history = Arc::new(JsonlStore::new(&home));
    let memory = Arc::new(MemoryFile::new(&workspace));
    let mut registry = ToolRegistry::new();
    registry.register(NamedTool::named("alpha")).unwrap();
    registry.register(NamedTool::named("beta")).unwrap();
    let locks = Arc::new(SessionLocks::new());
    let parts = SubAgentParts {
        llm: default_llm.clone(),
        tools: registry.clone(),
        history: history.clone(),
        memory: memory.clone(),
        clock: Arc::new(SystemClock),
        settings: MemorySettings::default(),
        workspace: workspace.clone(),
        locks: locks.clone(),
    };
    let url = llm.url();
    let hub = SpawnHub::new(&config, parts, limits, |pool: &str| {
        Ok::<_, String>(client(&url, &format!("{pool}-model")))
    })
    .unwrap();
    let hub = Arc::new(hub);
    registry
        .register(Arc::new(SpawnTool::new(hub.clone())))
        .unwrap();
    registry
        .register(Arc::new(SpawnAwaitTool::new(hub.clone())))
        .unwrap();
    let prompt = FixedPrompt(PromptSections {
        base: BASE_PROMPT.to_owned(),
        ..PromptSections::default()
    });
    let manager = MemoryManager::new(
        history,
        memory,
        Arc::new(prompt),
        None,
        MemorySettings::default(),
    );
    let agent = AgentLoop::new(
        default_llm,
        Arc::new(registry),
        Arc::new(manager),
        locks,
        Arc::new(SystemClock),
    );
    Setup {
        _dir: dir,
        home,
        llm,
        hub,
        agent,
    }
}

fn enabled(max_concurrent: usize, profiles: BTreeMap<String, SpawnProfile>) -> SpawnConfig {
    SpawnConfig {
        enabled: true,
        max_concurrent,
        profiles,
    }
}

fn session(key: &str) -> SessionId {
    SessionId::new("cli", key).unwrap()
}

impl Setup {
    async fn call(&self, name: &str, arguments: Value, caller: &SessionId) -> ToolOutput {
        let context = ToolContext {
            session: caller.clone(),
            metadata: serde_json::Map::new(),
            prompt_tail: None,
            approvals: None,
            audience: Default::default(),
            authority: squidbot::core::authority::Authority::Owner,
        };
        let tool = self.agent.tools().get(name).unwrap();
        tool.call(arguments, &context).await
    }

    async fn spawn(&self, arguments: Value, caller: &SessionId) -> String {
        let out = self.call("spawn", arguments, caller).await;
        assert!(!out.is_error, "{}", out.content);
        out.content
    }

    async fn collect(&self, ids: &str, caller: &SessionId) -> String {
        let out = self
            .call("spawn_await", json!({"job_ids": ids}), caller)
            .await;
        assert!(!out.is_error, "{}", out.content);
        out.content
    }

    fn history(&self, session: &SessionId) -> Vec<Message> {
        let path = self
            .home
            .join("sessions")
            .join(format!("{}.jsonl", safe_id::encode(session)));
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Sub-agent requests whose system prompt contains `mark`.
    fn sub_requests(&self, mark: &str) -> Vec<Value> {
        self.llm
            .requests()
            .into_iter()
            .filter(|r| system_text(r).contains(mark))
            .collect()
    }
}

#[tokio::test]
async fn spawn_returns_at_once_and_the_turn_lands_in_its_own_session() {
    let s = setup(enabled(4, BTreeMap::new()), SpawnLimits::default()).await;
    s.llm.enqueue(Reply::Delay {
        ms: 500,
        then: Box::new(Reply::Text("slow result".to_owned())),
    });
    let parent = session("local");
    let started = Instant::now();
    let id = s
        .spawn(json!({"task": "count", "context": "Background."}), &parent)
        .await;
    assert!(started.elapsed() < Duration::from_millis(300));
    assert_eq!(id.len(), 8);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");

    let out = s.collect(&id, &parent).await;
    assert_eq!(out, format!("[{id}: OK]\nslow result"));

    let sub = s.history(&SessionId::new("spawn", &id).unwrap());
    let roles: Vec<Role> = sub.iter().map(|m| m.role).collect();
    assert_eq!(roles, vec![Role::User, Role::Assistant]);
    assert_eq!(sub[0].content, "Background.\n\ncount");
    assert_eq!(sub[0].sender_id.as_deref(), Some("cli:local"));
    assert_eq!(sub[1].content, "slow result");
    assert!(
        s.history(&parent).is_empty(),
        "the parent session stays clean"
    );
    // A collected job is gone.
    assert_eq!(s.collect(&id, &parent).await, format!("[{id}: NOT FOUND]"));
    assert_eq!(s.hub.job_count(), 0);
}

#[tokio::test]
async fn a_parent_turn_spawns_and_awaits_through_tool_calls() {
    let s = setup(enabled(4, BTreeMap::new()), SpawnLimits::default()).await;
    s.llm.set_handler(|request| {
        let system = system_text(request);
        if !system.starts_with(BASE_PROMPT) {
            return Reply::Text("sub answer".to_owned());
        }
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or_default();
        let calls = |id: &str, name: &str, args: String| Reply::ToolCalls {
            text: String::new(),
            calls: vec![(id.to_owned(), name.to_owned(), args)],
        };
        match last["tool_call_id"].as_str() {
            None => calls("c1", "spawn", json!({"task": "look it up"}).to_string()),
            Some("c1") => {
                let id = last["content"].as_str().unwrap_or_default();
                calls("c2", "spawn_await", json!({"job_ids": id}).to_string())
            }
            Some(_) => Reply::Text(format!(
                "final: {}",
                last["content"].as_str().unwrap_or_default()
            )),
        }
    });
    let parent = session("local");
    let outcome = s
        .agent
        .run(
            TurnRequest::new(parent.clone(), "research this", Origin::owner()),
            Arc::new(CollectingSink::new()),
        )
        .await
        .unwrap();
    assert!(outcome.reply.starts_with("final: ["), "{}", outcome.reply);
    assert!(
        outcome.reply.ends_with(": OK]\nsub answer"),
        "{}",
        outcome.reply
    );
    let history = s.history(&parent);
    assert!(history.iter().all(|m| m.content != "look it up"));
    assert_eq!(history.first().unwrap().content, "research this");
}

#[tokio::test]
async fn a_profile_picks_its_tools_prompt_files_and_pool() {
    let mut research = profile("You research.", &["alpha"], "research");
    research.bootstrap_files = vec!["AGENTS.md".to_owned()];
    research.system_prompt_file = "RESEARCH.md".to_owned();
    let profiles = BTreeMap::from([
        ("research".to_owned(), research),
        ("writer".to_owned(), profile("You write.", &[], "")),
    ]);
    let s = setup(enabled(4, profiles), SpawnLimits::default()).await;
    let parent = session("local");

    let spec = s.agent.tools().get("spawn").unwrap().spec().clone();
    let parameters: Value = serde_json::from_str(spec.parameters()).unwrap();
    assert_eq!(
        parameters["properties"]["profile"]["enum"],
        json!(["research", "writer"])
    );

    let research = s
        .spawn(json!({"task": "find", "profile": "research"}), &parent)
        .await;
    let writer = s
        .spawn(json!({"task": "write", "profile": "writer"}), &parent)
        .await;
    let plain = s.spawn(json!({"task": "plain"}), &parent).await;
    let chosen = s
        .spawn(
            json!({"task": "picked", "tools": "beta", "system_prompt": "Custom."}),
            &parent,
        )
        .await;
    let out = s.collect("*", &parent).await;
    for id in [&research, &writer, &plain, &chosen] {
        assert!(out.contains(&format!("[{id}: OK]")), "{out}");
    }

    let request = &s.sub_requests("You research.")[0];
    let system = system_text(request);
    assert!(
        system.starts_with("Agent rules.\n\n---\n\nResearch method.\n\n---\n\nYou research."),
        "{system}"
    );
    assert_eq!(tool_names(request), vec!["alpha"]);
    assert_eq!(request["model"], "research-model");

    let request = &s.sub_requests("You write.")[0];
    assert_eq!(tool_names(request), vec!["alpha", "beta"]);
    assert_eq!(request["model"], "default-model");
    assert!(!system_text(request).contains("Research method."));

    let request = &s.sub_requests("Custom.")[0];
    assert_eq!(tool_names(request), vec!["beta"]);

    // No sub-agent is ever offered spawn or spawn_await.
    for request in s.llm.requests() {
        let names = tool_names(&request);
        assert!(!names.iter().any(|n| n.starts_with("spawn")), "{names:?}");
    }
}

#[tokio::test]
async fn without_profiles_the_schema_has_no_profile_and_bad_calls_are_errors() {
    let s = setup(enabled(4, BTreeMap::new()), SpawnLimits::default()).await;
    let spec = s.agent.tools().get("spawn").unwrap().spec().clone();
    let parameters: Value = serde_json::from_str(spec.parameters()).unwrap();
    assert!(parameters["properties"].get("profile").is_none());
    let parent = session("local");
    for arguments in [
        json!({}),
        json!({"task": " "}),
        json!({"task": "x", "profile": "nope"}),
        json!({"task": "x", "tools": "alpha,spawn"}),
        json!({"task": "x", "bogus": 1}),
    ] {
        let out = s.call("spawn", arguments.clone(), &parent).await;
        assert!(out.is_error, "{arguments}: {}", out.content);
    }
    let out = s
        .call("spawn", json!({"task": "x", "profile": "nope"}), &parent)
        .await;
    assert_eq!(out.content, "Error: unknown profile \"nope\" (known: none)");
    assert!(s.call("spawn_await", json!({}), &parent).await.is_error);
    assert!(
        s.call("spawn_await", json!({"job_ids": " , "}), &parent)
            .await
            .is_error
    );
    assert_eq!(s.collect("*", &parent).await, "No jobs found.");
    assert_eq!(
        s.collect("0badf00d", &parent).await,
        "[0badf00d: NOT FOUND]"
    );
}

#[tokio::test]
async fn spawn_await_embeds_errors_and_star_only_waits_for_the_callers_jobs() {
    let profiles = BTreeMap::from([("broken".to_owned(), profile("Broken.", &[], "broken"))]);
    let s = setup(enabled(4, profiles), SpawnLimits::default()).await;
    s.llm.enqueue_for(
        "broken-model",
        Reply::Status {
            status: 401,
            body: r#"{"error": {"message": "invalid key"}}"#.to_owned(),
            retry_after: None,
        },
    );
    let (a, b) = (session("a"), session("b"));
    let failing = s.spawn(json!({"task": "x", "profile": "broken"}), &a).await;
    let ok = s.spawn(json!({"task": "fine"}), &a).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // B's job never finishes within the test: `*` from A must not wait for it.
    s.llm.enqueue_for(
        "default-model",
        Reply::Delay {
            ms: 60_000,
            then: Box::new(Reply::Text("late".to_owned())),
        },
    );
    let other = s.spawn(json!({"task": "slow"}), &b).await;

    let started = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(10), s.collect("*", &a))
        .await
        .expect("`*` waits only for the caller's jobs");
    assert!(started.elapsed() < Duration::from_secs(5));
    let blocks: Vec<&str> = out.split("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{out}");
    assert!(
        blocks[0].starts_with(&format!("[{failing}: ERROR (llm)]\n")),
        "{out}"
    );
    assert_eq!(blocks[1], format!("[{ok}: OK]\ndid: fine"));
    // Another session's job is invisible by id too.
    assert_eq!(
        s.collect(&format!("{other}, {ok}"), &a).await,
        format!("[{other}: NOT FOUND]\n\n[{ok}: NOT FOUND]")
    );
    assert_eq!(s.collect("*", &a).await, "No jobs found.");
    assert_eq!(s.hub.job_count(), 1);
}

#[tokio::test]
async fn max_concurrent_bounds_the_sub_agents_calling_the_llm() {
    let s = setup(enabled(2, BTreeMap::new()), SpawnLimits::default()).await;
    s.llm.set_handler(|_| Reply::text_after(400, "done"));
    let parent = session("local");
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(s.spawn(json!({"task": format!("job {i}")}), &parent).await);
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(s.llm.request_count(), 2, "only two sub-agents run at once");
    let out = s.collect(&ids.join(","), &parent).await;
    assert_eq!(out.matches(": OK]").count(), 5, "{out}");
    assert_eq!(s.llm.request_count(), 5);
}

#[tokio::test]
async fn uncollected_results_are_pruned_and_slow_jobs_reported_as_running() {
    let limits = SpawnLimits {
        await_timeout: Duration::from_millis(300),
        job_ttl: Duration::from_millis(300),
        max_jobs: 8,
    };
    let s = setup(enabled(4, BTreeMap::new()), limits).await;
    let parent = session("local");
    s.llm.enqueue(Reply::Delay {
        ms: 800,
        then: Box::new(Reply::Text("eventually".to_owned())),
    });
    let slow = s.spawn(json!({"task": "slow"}), &parent).await;
    let out = s.collect(&slow, &parent).await;
    assert!(out.starts_with(&format!("[{slow}: RUNNING]")), "{out}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        s.collect(&slow, &parent).await,
        format!("[{slow}: OK]\neventually")
    );

    let forgotten = s.spawn(json!({"task": "quick"}), &parent).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(s.hub.job_count(), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(s.hub.job_count(), 0);
    assert_eq!(
        s.collect(&forgotten, &parent).await,
        format!("[{forgotten}: NOT FOUND]")
    );
}

#[tokio::test]
async fn shutdown_lets_running_sub_agents_finish_and_starts_no_more() {
    let s = setup(enabled(1, BTreeMap::new()), SpawnLimits::default()).await;
    s.llm.set_handler(|request| Reply::Delay {
        ms: 400,
        then: Box::new(Reply::Text(format!(
            "finished: {}",
            request["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
        ))),
    });
    let parent = session("local");
    let running = s.spawn(json!({"task": "first"}), &parent).await;
    // One slot: the second job waits for it, and shutdown ends it before it starts.
    let waiting = s.spawn(json!({"task": "second"}), &parent).await;
    while s.llm.request_count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(s.hub.status().running, 2);

    assert_eq!(s.hub.shutdown(Duration::from_secs(10)).await, 0);
    let refused = s.call("spawn", json!({"task": "third"}), &parent).await;
    assert!(refused.is_error);
    assert!(
        refused.content.contains("shutting down"),
        "{}",
        refused.content
    );

    let first = s.history(&SessionId::new("spawn", &running).unwrap());
    let texts: Vec<&str> = first.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, ["first", "finished: first"]);
    assert!(
        s.history(&SessionId::new("spawn", &waiting).unwrap())
            .is_empty(),
        "a job that never started persisted nothing"
    );
    assert_eq!(s.llm.request_count(), 1);
    let out = s.collect("*", &parent).await;
    assert!(
        out.contains(&format!("[{running}: OK]\nfinished: first")),
        "{out}"
    );
    assert!(
        out.contains(&format!("[{waiting}: ERROR (not started)]")),
        "{out}"
    );
}

#[tokio::test]
async fn shutdown_aborts_a_sub_agent_that_outlives_the_grace_period() {
    let s = setup(enabled(2, BTreeMap::new()), SpawnLimits::default()).await;
    s.llm.set_handler(|_| Reply::text_after(30_000, "too late"));
    let parent = session("local");
    let id = s.spawn(json!({"task": "endless"}), &parent).await;
    while s.llm.request_count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    assert_eq!(s.hub.shutdown(Duration::from_millis(300)).await, 1);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(s.hub.status().running, 0);
    let out = s.collect(&id, &parent).await;
    assert_eq!(
        out,
        format!("[{id}: ERROR (stopped)]\nThe sub-agent was stopped: squidbot is shutting down.")
    );
    let texts: Vec<String> = s
        .history(&SessionId::new("spawn", &id).unwrap())
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(
        texts,
        ["endless"],
        "the task was kept, no reply was invented"
    );
}
