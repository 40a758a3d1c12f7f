//! The agent loop against the scripted LLM: tool rounds, persistence, errors, extra tools,
//! streaming without duplication, cancellation.

use crate::support::bin::tool_names;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};
use squidbot::core::agent_loop::{CANCELLED_NOTE, TurnError, TurnRequest};
use squidbot::core::memory_manager::MemorySettings;
use squidbot::core::message::Role;
use squidbot::core::origin::Origin;
use squidbot::core::ports::channel::CollectingSink;
use squidbot::core::ports::tool::{Tool, ToolContext, ToolOutput, ToolSpec};
use squidbot::core::session::SessionId;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::harness::Harness;
use crate::support::scripted_llm::Reply;

/// A per-turn tool that counts its calls.
struct Probe {
    spec: ToolSpec,
    calls: Arc<AtomicUsize>,
}

impl Probe {
    fn new(calls: Arc<AtomicUsize>) -> Self {
        Self {
            spec: no_arguments("probe"),
            calls,
        }
    }
}

fn no_arguments(name: &str) -> ToolSpec {
    ToolSpec::new(
        name,
        "Test tool.",
        &json!({"type": "object", "properties": {}}),
    )
}

/// A tool that says it started and then never finishes.
struct Stuck {
    spec: ToolSpec,
    started: Arc<Notify>,
}

#[async_trait]
impl Tool for Stuck {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn effects(&self) -> squidbot::core::authority::Effects {
        squidbot::core::authority::Effects::NONE
    }
    async fn call(&self, _arguments: Value, _context: &ToolContext) -> ToolOutput {
        self.started.notify_one();
        std::future::pending().await
    }
}

#[async_trait]
impl Tool for Probe {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn effects(&self) -> squidbot::core::authority::Effects {
        squidbot::core::authority::Effects::NONE
    }
    async fn call(&self, _arguments: Value, context: &ToolContext) -> ToolOutput {
        self.calls.fetch_add(1, Ordering::SeqCst);
        ToolOutput::ok(format!("probed {}", context.session))
    }
}

fn session() -> SessionId {
    SessionId::new("test", "agent").unwrap()
}

fn calls(list: &[(&str, &str, &str)]) -> Reply {
    Reply::ToolCalls {
        text: String::new(),
        calls: list
            .iter()
            .map(|(id, name, args)| ((*id).into(), (*name).into(), (*args).into()))
            .collect(),
    }
}

#[tokio::test]
async fn an_extra_tool_is_usable_in_its_turn_and_absent_afterwards() {
    let h = Harness::start(MemorySettings::default()).await;
    let count = Arc::new(AtomicUsize::new(0));
    h.llm
        .enqueue(calls(&[("p1", "probe", "{}"), ("p2", "probe", "{}")]));
    h.llm.enqueue(Reply::Text("done".into()));
    let probe: Arc<dyn Tool> = Arc::new(Probe::new(count.clone()));
    let (result, delivered) = h.say_with(&session(), "go", vec![probe]).await;
    assert_eq!(result.unwrap().tool_rounds, 1);
    assert_eq!(delivered, ["done"]);
    assert_eq!(count.load(Ordering::SeqCst), 2, "both parallel calls ran");
    assert!(
        h.agent.tools().get("probe").is_none(),
        "the registry never saw it"
    );

    h.say(&session(), "again").await.0.unwrap();
    let requests = h.chat_requests();
    assert!(tool_names(&requests[0]).contains(&"probe".to_owned()));
    assert!(!tool_names(requests.last().unwrap()).contains(&"probe".to_owned()));

    // The whole exchange is persisted in order, with results linked to their calls.
    let history = h.history(&session());
    let roles: Vec<Role> = history.iter().take(5).map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Tool,
            Role::Assistant
        ]
    );
    assert_eq!(history[2].tool_call_id.as_deref(), Some("p1"));
    assert_eq!(history[2].content, "probed test:agent");
    // Tool-call arguments go back to the API as a JSON string, not a language-specific repr.
    let second_call = &requests[1]["messages"];
    let assistant = second_call
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .unwrap();
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], "{}");
}

#[tokio::test]
async fn bad_tool_calls_become_error_results_and_the_turn_goes_on() {
    let h = Harness::start(MemorySettings::default()).await;
    h.llm.enqueue(calls(&[
        ("a", "memory_write", "{not json"),
        ("b", "no_such_tool", "{}"),
        ("c", "memory_write", r#"{"text": "x"}"#),
    ]));
    h.llm.enqueue(Reply::Text("recovered".into()));
    let (result, delivered) = h.say(&session(), "go").await;
    result.unwrap();
    assert_eq!(delivered, ["recovered"]);
    let history = h.history(&session());
    let result_of = |id: &str| {
        history
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some(id))
            .unwrap()
            .content
            .clone()
    };
    assert!(
        result_of("a").contains("not valid JSON"),
        "{}",
        result_of("a")
    );
    assert!(
        result_of("b").contains("unknown tool"),
        "{}",
        result_of("b")
    );
    assert!(
        result_of("c").contains("invalid arguments"),
        "{}",
        result_of("c")
    );
}

#[tokio::test]
async fn an_llm_failure_is_told_to_the_user_and_no_reply_is_persisted() {
    let h = Harness::start(MemorySettings::default()).await;
    for (status, words) in [(401, "API key"), (429, "rate limit"), (500, "HTTP 500")] {
        h.llm.enqueue(Reply::Status {
            status,
            body: "nope".into(),
            retry_after: None,
        });
        let (result, delivered) = h.say(&session(), &format!("status {status}")).await;
        assert!(matches!(result, Err(TurnError::Llm(_))), "{status}");
        assert_eq!(delivered.len(), 1);
        assert!(delivered[0].contains(words), "{status}: {}", delivered[0]);
    }
    let history = h.history(&session());
    assert_eq!(
        history.len(),
        3,
        "only the three user messages are persisted"
    );
    assert!(history.iter().all(|m| m.role == Role::User));
}

#[tokio::test]
async fn an_endless_tool_loop_is_stopped() {
    let h = Harness::start(MemorySettings::default()).await;
    // Different arguments every round, so the loop breaker (identical calls) never fires and
    // the round limit does.
    h.llm.set_handler(|request| Reply::ToolCalls {
        text: String::new(),
        calls: vec![(
            "x".into(),
            "probe".into(),
            json!({ "round": request["messages"].as_array().unwrap().len() }).to_string(),
        )],
    });
    let count = Arc::new(AtomicUsize::new(0));
    let probe: Arc<dyn Tool> = Arc::new(Probe::new(count.clone()));
    let (result, delivered) = h.say_with(&session(), "loop", vec![probe]).await;
    assert!(matches!(result, Err(TurnError::TooManyToolRounds(20))));
    assert_eq!(count.load(Ordering::SeqCst), 20);
    assert!(delivered[0].contains("20 tool rounds"));
    assert_eq!(h.llm.request_count(), 20);
}

#[tokio::test]
async fn a_turn_cancelled_while_a_tool_runs_ends_with_the_note_and_without_the_call() {
    let h = Harness::start(MemorySettings::default()).await;
    h.llm.enqueue(calls(&[("s1", "stuck", "{}")]));
    let started = Arc::new(Notify::new());
    let stuck: Arc<dyn Tool> = Arc::new(Stuck {
        spec: no_arguments("stuck"),
        started: started.clone(),
    });
    let cancel = CancellationToken::new();
    let mut request = TurnRequest::new(session(), "go", Origin::owner());
    request.extra_tools = vec![stuck];
    request.cancel = cancel.clone();
    let sink = Arc::new(CollectingSink::new());
    let cancel_once_started = async {
        started.notified().await;
        cancel.cancel();
    };
    let (result, ()) = tokio::join!(h.agent.run(request, sink.clone()), cancel_once_started);
    assert!(matches!(result, Err(TurnError::Cancelled)), "{result:?}");
    assert!(sink.delivered().is_empty(), "nothing is delivered");
    let history: Vec<(Role, String)> = h
        .history(&session())
        .into_iter()
        .map(|m| (m.role, m.content))
        .collect();
    assert_eq!(
        history,
        [
            (Role::User, "go".to_owned()),
            (Role::Assistant, CANCELLED_NOTE.to_owned())
        ],
        "the unanswered tool call is not written"
    );

    // The session goes on, and its next prompt has the note, not the unanswered call.
    let (result, delivered) = h.say(&session(), "again").await;
    result.unwrap();
    assert_eq!(delivered, ["re: again"]);
    let requests = h.chat_requests();
    let messages = requests.last().unwrap()["messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .all(|m| m["role"] != "tool" && m["tool_calls"].is_null())
    );
    assert!(messages.iter().any(|m| m["content"] == CANCELLED_NOTE));
}

#[tokio::test]
async fn identical_calls_are_refused_at_the_third_and_end_the_turn_at_the_fifth() {
    let h = Harness::start(MemorySettings::default()).await;
    // The same call every round, its arguments written in a different key order each time.
    h.llm.set_handler(|request| {
        let round = request["messages"].as_array().unwrap().len();
        let args = if round % 2 == 0 {
            r#"{"a": 1, "b": [2]}"#
        } else {
            r#"{ "b": [2], "a": 1 }"#
        };
        Reply::ToolCalls {
            text: String::new(),
            calls: vec![(format!("c{round}"), "probe".into(), args.into())],
        }
    });
    let count = Arc::new(AtomicUsize::new(0));
    let probe: Arc<dyn Tool> = Arc::new(Probe::new(count.clone()));
    let (result, delivered) = h.say_with(&session(), "loop", vec![probe]).await;
    assert!(
        matches!(&result, Err(TurnError::Repeating(tool)) if tool == "probe"),
        "{result:?}"
    );
    assert_eq!(
        count.load(Ordering::SeqCst),
        2,
        "only the first two calls ran"
    );
    assert_eq!(h.llm.request_count(), 5, "the fifth call ended the turn");
    assert_eq!(
        delivered,
        [squidbot::core::loop_breaker::stop_message("probe")]
    );
    // The third and fourth calls were answered with the refusal, which the model saw.
    let last_request = h.chat_requests().pop().unwrap();
    let refusals = last_request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m["role"] == "tool"
                && m["content"]
                    .as_str()
                    .unwrap()
                    .contains("repeating yourself")
        })
        .count();
    assert_eq!(refusals, 2);
    // The history ends with the message the person got; the unrun fifth call is not in it.
    let history = h.history(&session());
    let last = history.last().unwrap();
    assert_eq!(last.role, Role::Assistant);
    assert_eq!(
        last.content,
        squidbot::core::loop_breaker::stop_message("probe")
    );
    assert!(last.tool_calls.is_none());
}
