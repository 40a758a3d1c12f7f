//! A real agent over real files and a real HTTP LLM (the scripted server) for one test.
//!
//! Each harness gets a fresh temporary `$SQUIDBOT_HOME`, a scripted server whose default
//! handler answers consolidation requests with summaries that name the messages they cover and
//! echoes everything else, and an `AgentLoop` assembled from the production adapters.
//! [`Harness::restart`] drops the agent and builds a new one on the same directory, which is
//! what a process restart looks like to the memory system.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use squidbot::core::agent_loop::{AgentLoop, TurnError, TurnOutcome, TurnRequest};
use squidbot::core::audience::Audience;
use squidbot::core::memory_manager::{MemoryManager, MemorySettings};
use squidbot::core::message::Message;
use squidbot::core::origin::Origin;
use squidbot::core::ports::channel::CollectingSink;
use squidbot::core::ports::clock::SystemClock;
use squidbot::core::ports::llm::LlmClient;
use squidbot::core::ports::prompt::{FixedPrompt, PromptSections};
use squidbot::core::ports::tool::Tool;
use squidbot::core::session::SessionId;
use squidbot::core::session_locks::SessionLocks;
use squidbot::core::tool_registry::ToolRegistry;
use squidbot::llm::{Endpoint, LlmPool, OpenAiCompatLlm, RetryPolicy, Timeouts};
use squidbot::storage::{JsonlStore, MemoryFile, safe_id};
use squidbot::tools::MemoryWriteTool;

use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// The first words of the consolidation system prompt (how the server recognises it).
pub const SUMMARY_MARK: &str = "You are a memory consolidation assistant. You write";
/// The first words of the meta-consolidation system prompt.
pub const META_MARK: &str = "You are a memory consolidation assistant. You are given";

/// The base prompt every harness agent uses.
pub const BASE_PROMPT: &str = "You are the test agent.";

pub struct Harness {
    pub _dir: tempfile::TempDir,
    pub home: PathBuf,
    pub workspace: PathBuf,
    pub llm: ScriptedLlm,
    pub agent: Arc<AgentLoop>,
    pub settings: MemorySettings,
    pub context_tokens: Option<u32>,
}

/// What kind of request the scripted server received.
pub fn system_text(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The default scripted behaviour: summaries list the user lines they cover; replies echo.
pub fn default_reply(request: &Value) -> Reply {
    let system = system_text(request);
    let user = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    if system.starts_with(SUMMARY_MARK) {
        let covered: Vec<&str> = user
            .lines()
            .filter(|l| l.starts_with("user: "))
            .map(|l| &l["user: ".len()..])
            .collect();
        Reply::Text(format!("Summary of {}.", covered.join(", ")))
    } else if system.starts_with(META_MARK) {
        Reply::Text("Compact summary.".to_owned())
    } else {
        // The person's words only: squidbot's notes to the model (a memory change, the
        // consolidation warning) ride after them, separated by a blank line.
        let said = user.split("\n\n[System:").next().unwrap_or_default();
        Reply::Text(format!("re: {said}"))
    }
}

/// The user lines (`user: ...`) that consolidation requests among `requests` asked to summarize.
pub fn summarized_lines(requests: &[Value]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| system_text(r).starts_with(SUMMARY_MARK))
        .flat_map(|r| {
            let prompt = r["messages"][1]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            prompt
                .lines()
                .filter(|l| l.starts_with("user: "))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

impl Harness {
    pub async fn start(settings: MemorySettings) -> Self {
        Self::start_with(settings, None).await
    }

    pub async fn start_with(settings: MemorySettings, context_tokens: Option<u32>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        let workspace = home.join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let llm = ScriptedLlm::start().await;
        llm.set_handler(default_reply);
        let agent = build_agent(&home, &workspace, &llm.url(), settings, context_tokens);
        Self {
            _dir: dir,
            home,
            workspace,
            llm,
            agent,
            settings,
            context_tokens,
        }
    }

    /// A fresh agent and memory manager on the same directory: a simulated restart.
    pub fn restart(&mut self) {
        self.agent = build_agent(
            &self.home,
            &self.workspace,
            &self.llm.url(),
            self.settings,
            self.context_tokens,
        );
    }

    /// Runs one turn of `session` with `memory_write` as its extra tool.
    pub async fn say(
        &self,
        session: &SessionId,
        text: &str,
    ) -> (Result<TurnOutcome, TurnError>, Vec<String>) {
        self.say_with(session, text, Vec::new()).await
    }

    /// Runs one turn of the owner alone (private memory included) with `extra` tools and
    /// `memory_write`.
    pub async fn say_with(
        &self,
        session: &SessionId,
        text: &str,
        extra: Vec<Arc<dyn Tool>>,
    ) -> (Result<TurnOutcome, TurnError>, Vec<String>) {
        self.say_to(Audience::Owner, session, text, extra).await
    }

    /// Runs one turn of `audience` with `extra` tools and `memory_write`.
    pub async fn say_to(
        &self,
        audience: Audience,
        session: &SessionId,
        text: &str,
        mut extra: Vec<Arc<dyn Tool>>,
    ) -> (Result<TurnOutcome, TurnError>, Vec<String>) {
        let memory = Arc::new(MemoryFile::new(&self.workspace));
        extra.push(Arc::new(MemoryWriteTool::new(memory, session.clone())));
        let mut request = TurnRequest::new(session.clone(), text, Origin::person("tester"));
        request.extra_tools = extra;
        request.readers = audience.readers();
        let sink = Arc::new(CollectingSink::new());
        let result = self.agent.run(request, sink.clone()).await;
        (result, sink.delivered())
    }

    pub fn stem(&self, session: &SessionId) -> String {
        safe_id::encode(session)
    }

    /// Every readable message of the session's JSONL, read directly from the file.
    pub fn history(&self, session: &SessionId) -> Vec<Message> {
        let path = self
            .home
            .join("sessions")
            .join(format!("{}.jsonl", self.stem(session)));
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The persisted `last_consolidated` (0 when there is no cursor file).
    pub fn cursor(&self, session: &SessionId) -> u64 {
        let path = self
            .home
            .join("sessions")
            .join(format!("{}.meta.json", self.stem(session)));
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["last_consolidated"].as_u64())
            .unwrap_or(0)
    }

    pub fn summary(&self, session: &SessionId) -> String {
        std::fs::read_to_string(
            self.home
                .join("memory")
                .join(self.stem(session))
                .join("summary.md"),
        )
        .unwrap_or_default()
    }

    /// Requests the server got, split by kind.
    pub fn requests_marked(&self, mark: &str) -> Vec<Value> {
        self.llm
            .requests()
            .into_iter()
            .filter(|r| system_text(r).starts_with(mark))
            .collect()
    }

    pub fn chat_requests(&self) -> Vec<Value> {
        self.llm
            .requests()
            .into_iter()
            .filter(|r| system_text(r).starts_with(BASE_PROMPT))
            .collect()
    }
}

/// A client for the scripted server with short timeouts and no retries (tests stay fast).
pub fn scripted_client(url: &str, context_tokens: Option<u32>) -> Arc<dyn LlmClient> {
    scripted_pool("default", "scripted", "scripted-model", url, context_tokens)
}

/// The pool `pool` of one model of the scripted server at `url`: `model_name`, asking for
/// `model` with the test key; with `context_tokens`, that context and answers of 50 tokens.
/// Short timeouts and no retries keep the tests fast.
pub fn scripted_pool(
    pool: &str,
    model_name: &str,
    model: &str,
    url: &str,
    context_tokens: Option<u32>,
) -> Arc<dyn LlmClient> {
    let endpoint = Endpoint {
        model_name: model_name.to_owned(),
        model: model.to_owned(),
        api_base: url.to_owned(),
        api_key: Some("test-key".to_owned()),
        profile: squidbot::llm::Profile::default(),
        max_tokens: context_tokens.map(|_| 50),
        max_context_tokens: context_tokens,
        max_image_bytes: squidbot::llm::settings::DEFAULT_MAX_IMAGE_BYTES,
    };
    let timeouts = Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_secs(5),
        idle: Duration::from_secs(5),
        total: Duration::from_secs(10),
    };
    let model: Arc<dyn LlmClient> = Arc::new(OpenAiCompatLlm::new(
        reqwest::Client::new(),
        endpoint,
        timeouts,
    ));
    let retry = RetryPolicy {
        max_retries: 0,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
    };
    Arc::new(LlmPool::new(pool, vec![model], retry))
}

fn build_agent(
    home: &std::path::Path,
    workspace: &std::path::Path,
    url: &str,
    settings: MemorySettings,
    context_tokens: Option<u32>,
) -> Arc<AgentLoop> {
    let llm = scripted_client(url, context_tokens);
    let prompt = FixedPrompt(PromptSections {
        base: BASE_PROMPT.to_owned(),
        ..PromptSections::default()
    });
    let memory = MemoryManager::new(
        Arc::new(JsonlStore::new(home)),
        Arc::new(MemoryFile::new(workspace)),
        Arc::new(prompt),
        Some(llm.clone()),
        settings,
    );
    Arc::new(AgentLoop::new(
        llm,
        Arc::new(ToolRegistry::new()),
        Arc::new(memory),
        Arc::new(SessionLocks::new()),
        Arc::new(SystemClock),
    ))
}
