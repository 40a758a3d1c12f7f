//! The owner's memory stays private (#16 item 5): MEMORY.md, USER.md, `memory_write` and the
//! other sessions' history are part only of turns no one but the owner takes part in.
//!
//! The router tests run the gateway's real router and agent (real files, the scripted LLM over
//! HTTP) with messages that state their readers as a channel's do; the binary tests run the
//! real `squidbot` against the terminal and the HTTP API, which are the owner's by
//! construction. Matrix rooms and mail from other senders, through the real servers, are in
//! `matrix.rs` and `email.rs`.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use squidbot::core::audience::Readers;
use squidbot::core::memory_manager::MemorySettings;
use squidbot::core::origin::Origin;
use squidbot::core::ports::channel::{CollectingSink, Dispatch, Inbound, TurnResult, TurnTools};
use squidbot::core::ports::clock::SystemClock;
use squidbot::core::ports::tool::Tool;
use squidbot::core::session::SessionId;
use squidbot::gateway::{GatewayState, Metrics, Router};
use squidbot::storage::{HistoryIndex, MemoryFile};
use squidbot::tools::{MemoryWriteTool, SearchHistoryTool};

use crate::harness::{Harness, default_reply, system_text};
use crate::support::bin::{squidbot, stderr, tool_names};
use crate::support::config::TestConfig;
use crate::support::daemon::Gateway;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

const OWNER: &str = "@alex:example.org";
const STRANGER: &str = "@eve:example.org";
const MEMORY: &str = "- MEMORYMARK: Alex's bank is Tealeaf Savings\n";

/// The per-turn tools the gateway gives every turn: `memory_write`, and here `search_history`.
struct GatewayTools {
    workspace: std::path::PathBuf,
    search: Arc<SearchHistoryTool>,
}

impl TurnTools for GatewayTools {
    fn for_turn(
        &self,
        session: &SessionId,
        _metadata: &Map<String, Value>,
        _origin: &Origin,
    ) -> Vec<Arc<dyn Tool>> {
        let memory = Arc::new(MemoryFile::new(&self.workspace));
        vec![
            Arc::new(MemoryWriteTool::new(memory, session.clone())),
            self.search.clone(),
        ]
    }
}

/// A harness with MEMORY.md written, and a router over it. Who is the owner is stated by each
/// turn's origin and readers, as a channel's edge states it ([`OWNER`] is the owner's id).
async fn gateway() -> (Harness, Router) {
    let harness = Harness::start(MemorySettings::default()).await;
    std::fs::write(harness.workspace.join("MEMORY.md"), MEMORY).unwrap();
    let index = Arc::new(HistoryIndex::open(&harness.home).unwrap());
    let tools = GatewayTools {
        workspace: harness.workspace.clone(),
        search: Arc::new(SearchHistoryTool::new(index, Arc::new(SystemClock))),
    };
    let state = Arc::new(GatewayState::new(Arc::new(Metrics::new())));
    let router = Router::new(harness.agent.clone(), Arc::new(tools), None, state, 4);
    (harness, router)
}

fn room(id: &str) -> SessionId {
    SessionId::new("matrix", id).unwrap()
}

/// Runs one turn of `origin` in `session`, whose replies reach `readers`.
async fn turn(router: &Router, session: &SessionId, origin: Origin, readers: Readers, text: &str) {
    let sink = Arc::new(CollectingSink::new());
    let inbound = Inbound::new(session.clone(), text, origin, sink).read_by(readers);
    let outcome = router.submit(inbound).unwrap().await.unwrap();
    assert!(matches!(outcome, TurnResult::Replied(_)), "{outcome:?}");
}

/// The tool result of call `id` in `session`'s history.
fn tool_result(harness: &Harness, session: &SessionId, id: &str) -> String {
    harness
        .history(session)
        .into_iter()
        .find(|m| m.tool_call_id.as_deref() == Some(id))
        .map(|m| m.content)
        .unwrap_or_else(|| panic!("no result of {id} in {session}"))
}

#[tokio::test]
async fn only_a_room_of_the_owner_alone_gets_memory_and_memory_write_and_check_ins_follow_their_room()
 {
    let (harness, router) = gateway().await;
    let dm = room("!dm:example.org");
    let group = room("!group:example.org");
    let fresh = room("!unknown:example.org");
    let cases = [
        (&dm, Origin::owner_as(OWNER), Readers::Owner, true),
        (
            &group,
            Origin::owner_as(OWNER),
            Readers::Others { owner: true },
            false,
        ),
        // A member who is only invited can join and read on: the room is shared already.
        (
            &group,
            Origin::person(STRANGER),
            Readers::Others { owner: false },
            false,
        ),
        // Check-ins and jobs reply through their room's outbox: private exactly when it is.
        (&dm, Origin::Heartbeat, Readers::Owner, true),
        (
            &group,
            Origin::Heartbeat,
            Readers::Others { owner: true },
            false,
        ),
        (
            &group,
            Origin::Cron { job: "j1".into() },
            Readers::Others { owner: true },
            false,
        ),
        // A channel that cannot say who reads keeps the memory out.
        (&fresh, Origin::owner_as(OWNER), Readers::Unknown, false),
        // The terminal's and the API's sinks state the owner (the binary tests below check
        // that they do); a channel name alone makes nothing private.
        (
            &SessionId::cli_local(),
            Origin::owner(),
            Readers::Owner,
            true,
        ),
        (
            &SessionId::new("http", "alex").unwrap(),
            Origin::owner_as("http"),
            Readers::Unknown,
            false,
        ),
    ];
    for (session, origin, readers, _) in &cases {
        turn(&router, session, origin.clone(), *readers, "hello").await;
    }
    let requests = harness.chat_requests();
    assert_eq!(requests.len(), cases.len());
    for ((session, origin, readers, private), request) in cases.iter().zip(&requests) {
        let system = system_text(request);
        let tools = tool_names(request);
        let what = format!("{session} {origin} {readers:?}");
        assert_eq!(system.contains("MEMORYMARK"), *private, "{what}: {system}");
        assert_eq!(system.contains("## Your Memory"), *private, "{what}");
        assert_eq!(
            tools.contains(&"memory_write".to_owned()),
            *private,
            "{what}: {tools:?}"
        );
        assert!(tools.contains(&"search_history".to_owned()), "{what}");
    }
    assert!(router.shutdown(std::time::Duration::from_secs(5)).await);
}

#[tokio::test]
async fn a_shared_room_cannot_write_the_memory_or_search_the_owners_other_sessions() {
    let (harness, router) = gateway().await;
    let calls = |calls: &[(&str, &str, Value)]| Reply::ToolCalls {
        text: String::new(),
        calls: calls
            .iter()
            .map(|(id, name, arguments)| {
                ((*id).to_owned(), (*name).to_owned(), arguments.to_string())
            })
            .collect(),
    };
    let scripted = move |request: &Value| {
        let messages = request["messages"].as_array().unwrap();
        let last = messages.last().unwrap();
        if last["role"] == "tool" {
            return Reply::Text("done".into());
        }
        match last["content"].as_str().unwrap_or_default() {
            "try everything" => calls(&[
                ("w1", "memory_write", json!({"content": "- eve was here"})),
                ("s1", "search_history", json!({"query": "PINMARK code"})),
                (
                    "s2",
                    "search_history",
                    json!({"query": "PINMARK code", "session": "matrix:!dm:example.org"}),
                ),
            ]),
            "find it" => calls(&[("s3", "search_history", json!({"query": "PINMARK code"}))]),
            _ => default_reply(request),
        }
    };
    harness.llm.set_handler(scripted);
    let dm = room("!dm:example.org");
    let other_dm = room("!dm2:example.org");
    let group = room("!group:example.org");
    let alone = || Readers::Owner;
    let together = || Readers::Others { owner: true };
    turn(
        &router,
        &dm,
        Origin::owner_as(OWNER),
        alone(),
        "the PINMARK code of the safe is 4711",
    )
    .await;

    turn(
        &router,
        &group,
        Origin::person(STRANGER),
        together(),
        "try everything",
    )
    .await;
    let refused = tool_result(&harness, &group, "w1");
    assert!(refused.contains("not available here"), "{refused}");
    assert_eq!(
        std::fs::read_to_string(harness.workspace.join("MEMORY.md")).unwrap(),
        MEMORY,
        "a call made anyway changed nothing"
    );
    let searched = tool_result(&harness, &group, "s1");
    assert!(!searched.contains("4711"), "{searched}");
    let asked_for_dm = tool_result(&harness, &group, "s2");
    assert!(
        asked_for_dm.contains("only this conversation"),
        "{asked_for_dm}"
    );

    // The same search from another of the owner's private sessions finds the DM's message: the
    // shared room was kept from it, not just unlucky.
    turn(
        &router,
        &other_dm,
        Origin::owner_as(OWNER),
        alone(),
        "find it",
    )
    .await;
    let found = tool_result(&harness, &other_dm, "s3");
    assert!(found.contains("4711"), "{found}");
    assert!(router.shutdown(std::time::Duration::from_secs(5)).await);
}

/// Writes MEMORY.md and USER.md with markers into `workspace`.
fn private_files(workspace: &std::path::Path) {
    std::fs::create_dir_all(workspace).unwrap();
    std::fs::write(workspace.join("MEMORY.md"), MEMORY).unwrap();
    std::fs::write(
        workspace.join("USER.md"),
        "# User\n- USERMARK: Alex, tea drinker\n",
    )
    .unwrap();
}

/// Asserts that `request` carries the owner's private memory: both files and `memory_write`.
fn assert_private(request: &Value) {
    let system = system_text(request);
    assert!(system.contains("MEMORYMARK"), "{system}");
    assert!(system.contains("USERMARK"), "{system}");
    assert!(
        tool_names(request).contains(&"memory_write".to_owned()),
        "{:?}",
        tool_names(request)
    );
}

#[tokio::test]
async fn the_terminal_and_the_api_get_the_owners_memory() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let owner = "owner:\n  matrix: [\"@alex:example.org\"]\n";

    let gateway = Gateway::start(&llm.url(), owner, &[]).await;
    private_files(&gateway.home().join("workspace"));
    let (status, body) = gateway.say("alex", "hello from the API").await;
    assert_eq!(status, 200, "{body}");
    assert_private(&llm.requests()[0]);
    drop(gateway);

    let home = tempfile::tempdir().unwrap();
    TestConfig::new(&llm.url()).extra(owner).write(home.path());
    private_files(&home.path().join("workspace"));
    let output = squidbot(home.path())
        .args(["agent", "-m", "hello from the terminal"])
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    assert_private(&requests[1]);
}
