//! The real `squidbot gateway` binary end to end: the HTTP message API (plain and streamed),
//! auth, ordering across 20 concurrent sessions, /status and /metrics, a crashing channel
//! restarted while others answer, SIGTERM in the middle of a turn, and SIGTERM while a
//! sub-agent started by a finished turn is still running.

use std::time::Duration;

use serde_json::Value;

use crate::harness::{default_reply, system_text};
use crate::support::config::TestConfig;
use crate::support::daemon::{Gateway, TOKEN, deltas, sse_events};
use crate::support::gateway::Events;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

#[tokio::test]
async fn the_message_api_answers_plain_and_streamed() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let gw = Gateway::start(&llm.url(), "", &[]).await;
    let (status, body) = gw.say("alice", "hello").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, serde_json::json!({ "reply": "re: hello" }));

    llm.enqueue(Reply::Text("streamed answer here".into()));
    let events = gw.say_streamed("alice", "stream please").await;
    assert_eq!(deltas(&events).concat(), "streamed answer here");
    assert!(
        deltas(&events).len() > 1,
        "it arrived in pieces: {events:?}"
    );
    assert_eq!(
        events.last().unwrap(),
        &(
            "done".to_owned(),
            serde_json::json!({ "reply": "streamed answer here" })
        )
    );

    let history = std::fs::read_to_string(gw.session_file("alice")).unwrap();
    assert_eq!(history.lines().count(), 4);
}

#[tokio::test]
async fn the_message_api_refuses_a_missing_or_wrong_token_and_bad_input() {
    let llm = ScriptedLlm::start().await;
    let gw = Gateway::start(&llm.url(), "", &[]).await;
    let url = format!("{}/v1/sessions/mallory/messages", gw.base);
    let body = serde_json::json!({ "text": "let me in" });
    let missing = gw.http.post(&url).json(&body).send().await.unwrap();
    assert_eq!(missing.status(), 401);
    let wrong = gw
        .http
        .post(&url)
        .bearer_auth("nope")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let events = gw.get_anonymous("/v1/sessions/mallory/events").await;
    assert_eq!(events.status(), 401);
    assert_eq!(llm.request_count(), 0, "nothing reached the agent");
    assert!(!gw.session_file("mallory").exists());

    let bad_json = gw
        .http
        .post(&url)
        .bearer_auth(TOKEN)
        .body("{\"txt\": 1}")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_json.status(), 400);
    // Every body must be an object with the documented fields: serde would also read a struct
    // from an array of its fields, and `["let me in"]` once ran a turn.
    for body in [
        "[\"let me in\"]",
        "\"let me in\"",
        "null",
        "{\"text\": \"hi\", \"extra\": 1}",
        "{\"text\": [\"hi\"]}",
        "{}",
        // A key twice: refused, not "the last one wins" (#24).
        "{\"text\": \"a\", \"text\": \"b\"}",
    ] {
        let response = gw
            .http
            .post(&url)
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{body}");
        let error: serde_json::Value = response.json().await.unwrap();
        assert!(error["error"].is_string(), "{body}: {error}");
    }
    let bad_id = gw
        .http
        .post(format!("{}/v1/sessions/a%0Ab/messages", gw.base))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(bad_id.status(), 400);
    assert_eq!(llm.request_count(), 0);
}

#[tokio::test]
async fn without_a_token_the_message_api_does_not_exist() {
    let llm = ScriptedLlm::start().await;
    let gw = Gateway::start_with_token(&llm.url(), None, "", &[]).await;
    let response = gw
        .http
        .post(format!("{}/v1/sessions/x/messages", gw.base))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({ "text": "hi" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    assert_eq!(
        gw.get_text("/healthz").await,
        "ok\n",
        "operator routes stay up"
    );
    assert_eq!(llm.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_sessions_at_once_keep_each_sessions_replies_in_order() {
    let llm = ScriptedLlm::start().await;
    // Each session's first turn waits in the model until all twenty first turns are there:
    // were sessions handled one at a time, the first would wait forever and the test fail by
    // its deadline, whatever the machine's speed (no timed assertion).
    let together = std::sync::Arc::new(tokio::sync::Barrier::new(20));
    llm.set_handler(move |request| {
        let reply = default_reply(request);
        let last = request["messages"]
            .as_array()
            .and_then(|messages| messages.last())
            .map(|message| message["content"].to_string())
            .unwrap_or_default();
        if last.contains("-m0") {
            return Reply::Gated {
                gate: together.clone(),
                then: Box::new(reply),
            };
        }
        reply
    });
    let gw = std::sync::Arc::new(Gateway::start(&llm.url(), "", &[]).await);
    // Within a session a client sends its next message when the previous one is answered
    // (separate HTTP requests have no order of their own).
    let mut tasks = Vec::new();
    for s in 0..20 {
        let gw = gw.clone();
        tasks.push(tokio::spawn(async move {
            for m in 0..5 {
                let text = format!("s{s}-m{m}");
                let (status, body) = gw.say(&format!("s{s}"), &text).await;
                assert_eq!(status, 200, "{body}");
                assert_eq!(body["reply"], format!("re: {text}"));
            }
        }));
    }
    let all = async {
        for task in tasks {
            task.await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(120), all)
        .await
        .expect("the twenty sessions' first turns never ran at the same time");
    for s in 0..20 {
        let text = std::fs::read_to_string(gw.session_file(&format!("s{s}"))).unwrap();
        let records: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(records.len(), 10);
        let users: Vec<&str> = records
            .iter()
            .step_by(2)
            .map(|r| r["content"].as_str().unwrap())
            .collect();
        assert_eq!(
            users,
            (0..5).map(|m| format!("s{s}-m{m}")).collect::<Vec<_>>(),
            "arrival order kept"
        );
        for pair in records.chunks(2) {
            assert_eq!(
                pair[1]["content"],
                format!("re: {}", pair[0]["content"].as_str().unwrap())
            );
        }
    }
}

#[tokio::test]
async fn status_and_metrics_describe_the_running_gateway() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let gw = Gateway::start(&llm.url(), "", &[]).await;
    for i in 0..3 {
        assert_eq!(gw.say("bob", &format!("m{i}")).await.0, 200);
    }
    let status = gw.get_json("/status").await;
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"));
    assert!(status["uptime_seconds"].is_u64());
    assert_eq!(status["channels"]["http"]["state"], "running");
    assert_eq!(status["sessions"]["http:bob"]["messages"], 6);
    assert_eq!(status["sessions"]["http:bob"]["turns"], 3);
    let skills = status["skills"].as_array().unwrap();
    let memory = skills.iter().find(|s| s["name"] == "memory").unwrap();
    assert_eq!(memory["available"], true);
    assert_eq!(memory["always"], true);
    assert!(
        memory["location"]
            .as_str()
            .unwrap()
            .ends_with("bundled-skills/memory/SKILL.md")
    );
    let ready = gw.get_anonymous("/readyz").await;
    assert_eq!(ready.status(), 200);

    // #35 item 5: usage and activity only with the token; and no route answers a request
    // that names another host (a DNS-rebinding page), health included.
    let bare = gw.get_anonymous("/metrics").await;
    assert_eq!(bare.status(), 401);
    assert!(!bare.text().await.unwrap().contains("squidbot_"));
    for path in ["/healthz", "/status", "/metrics"] {
        let rebound = gw
            .http
            .get(format!("{}{path}", gw.base))
            .header("Host", "rebind.attacker.example:8765")
            .bearer_auth(crate::support::daemon::TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(rebound.status(), 421, "{path}");
    }
    let metrics = gw.get_text("/metrics").await;
    for needle in [
        "squidbot_turns_total{outcome=\"replied\"} 3",
        "squidbot_turn_duration_seconds_count 3",
        "squidbot_llm_calls_total{model=\"small\"} 3",
        "# TYPE squidbot_channel_restarts counter",
        "# TYPE squidbot_tool_calls counter",
        "# TYPE squidbot_consolidations counter",
        "# TYPE squidbot_llm_failures counter",
        "squidbot_channel_last_inbound_age_seconds{channel=\"http\"}",
        "squidbot_channel_stalled{channel=\"http\"} 0",
    ] {
        assert!(
            metrics.contains(needle),
            "missing {needle:?} in:\n{metrics}"
        );
    }
    // The HTTP API has no rounds: it reports its last inbound message and is never stalled.
    let http = &gw.get_json("/status").await["channels"]["http"];
    assert!(
        http["last_inbound_age_seconds"].as_f64().unwrap() < 60.0,
        "{http}"
    );
    assert_eq!(http["last_round_age_seconds"], Value::Null, "{http}");
    assert_eq!(http["stall_after_seconds"], Value::Null, "{http}");
    assert_eq!(http["stalled"], false, "{http}");
}

#[tokio::test]
async fn a_crashing_channel_is_restarted_while_the_others_keep_answering() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let gw = Gateway::start(&llm.url(), "", &[("SQUIDBOT_FAULT_CHANNEL", "panic:50")]).await;
    let mut restarts = 0;
    for i in 0..40 {
        let (status, body) = gw.say("steady", &format!("m{i}")).await;
        assert_eq!(status, 200, "{body}");
        let snapshot = gw.get_json("/status").await;
        restarts = snapshot["channels"]["fault"]["restarts"]
            .as_u64()
            .unwrap_or(0);
        if restarts >= 2 {
            assert!(
                snapshot["channels"]["fault"]["last_error"]
                    .as_str()
                    .unwrap()
                    .contains("injected panic")
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        restarts >= 2,
        "the fault channel was restarted ({restarts})"
    );
    let metrics = gw.get_text("/metrics").await;
    assert!(
        metrics.contains("squidbot_channel_restarts_total{channel=\"fault\"}"),
        "{metrics}"
    );
    assert_eq!(
        gw.get_json("/status").await["channels"]["http"]["state"],
        "running"
    );
}

#[tokio::test]
async fn sigterm_mid_turn_finishes_the_turn_and_exits_zero() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(|request| Reply::Delay {
        ms: 800,
        then: Box::new(default_reply(request)),
    });
    let mut gw = Gateway::start(&llm.url(), "", &[]).await;
    let url = format!("{}/v1/sessions/late/messages", gw.base);
    let client = gw.http.clone();
    let pending = tokio::spawn(async move {
        client
            .post(url)
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({ "text": "slow one" }))
            .send()
            .await
    });
    while llm.request_count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(gw.terminate().await, Some(0));
    let response = pending.await.unwrap().unwrap();
    assert_eq!(
        response.status(),
        200,
        "the in-flight turn was drained, not cut"
    );
    for entry in std::fs::read_dir(gw.home().join("sessions")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                serde_json::from_str::<Value>(line).expect("every JSONL line loads");
            }
        }
    }
    let history = std::fs::read_to_string(gw.session_file("late")).unwrap();
    assert_eq!(history.lines().count(), 2);
}

#[tokio::test]
async fn sigterm_waits_for_a_running_sub_agent_whose_profile_the_prompt_listed() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(|request| {
        if !system_text(request).contains("<available_spawn_profiles>") {
            // The sub-agent: still thinking when the gateway is told to stop.
            return Reply::Delay {
                ms: 1_500,
                then: Box::new(Reply::Text("dug it up".to_owned())),
            };
        }
        let last = request["messages"].as_array().unwrap().last().unwrap();
        if last["role"] == "tool" {
            return Reply::Text("started".to_owned());
        }
        Reply::ToolCalls {
            text: String::new(),
            calls: vec![(
                "c1".to_owned(),
                "spawn".to_owned(),
                serde_json::json!({"task": "dig", "profile": "digger"}).to_string(),
            )],
        }
    });
    let profiles = "tools:\n  spawn:\n    enabled: true\n    profiles:\n      digger:\n        system_prompt: Digs deep.\n        tools: [read_file]\n";
    let mut gw = Gateway::start(&llm.url(), profiles, &[]).await;
    let (status, body) = gw.say("boss", "go dig").await;
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("started")),
        "{body}"
    );
    let main = system_text(&llm.requests()[0]);
    assert!(
        main.contains("<available_spawn_profiles>\n  <profile name=\"digger\">Digs deep. Tools: read_file.</profile>\n</available_spawn_profiles>"),
        "{main}"
    );
    while llm.request_count() < 3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The spawn tool's result (the job's id) reaches the main agent's second call, which races
    // the sub-agent's first: find it by its content, not by its place.
    let requests = llm.requests();
    let last_message = |r: &Value| r["messages"].as_array().unwrap().last().unwrap().clone();
    let job = requests
        .iter()
        .map(last_message)
        .find(|m| m["role"] == "tool")
        .expect("the spawn result reached the main agent")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let spawn = &gw.get_json("/status").await["spawn"];
    assert_eq!(spawn["running"], 1, "{spawn}");
    assert_eq!(spawn["max_concurrent"], 4, "{spawn}");

    assert_eq!(gw.terminate().await, Some(0));
    let texts: Vec<String> = std::fs::read_to_string(gw.channel_session_file("spawn", &job))
        .unwrap()
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        texts,
        ["dig", "dug it up"],
        "the sub-agent's turn finished before exit"
    );
}

#[tokio::test]
async fn a_cron_job_is_delivered_to_an_http_session_and_an_unroutable_one_is_reported() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let gw = Gateway::start(&llm.url(), "", &[]).await;
    // Another process (the CLI) edits the job store while the gateway runs.
    gw.cron_every_second("ping", "say pong", "http:inbox");
    gw.cron_every_second("lost", "nobody hears this", "matrix:!room:example.org");

    let mut events = Events::open(&gw, "inbox").await;
    let first = events.next_within("message", Duration::from_secs(40)).await;
    assert_eq!(first["text"], "re: say pong");

    let history = std::fs::read_to_string(gw.session_file("inbox")).unwrap();
    let first_record: Value = serde_json::from_str(history.lines().next().unwrap()).unwrap();
    assert!(
        first_record["sender_id"]
            .as_str()
            .unwrap()
            .starts_with("cron:"),
        "{first_record}"
    );

    // The unroutable job was added after the delivered one, so its first slot may still be
    // ahead: wait for it (bounded) rather than reading /status once.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let (status, lost) = loop {
        let status = gw.get_json("/status").await;
        let jobs = status["cron"]["jobs"].as_array().unwrap().clone();
        let job = |name: &str| jobs.iter().find(|j| j["name"] == name).unwrap().clone();
        assert!(job("ping")["next_run"].is_string());
        let lost = job("lost");
        if !lost["last_error"].is_null() || tokio::time::Instant::now() > deadline {
            break (status, lost);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        lost["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("matrix"),
        "{lost}"
    );
    assert_eq!(status["channels"]["cron"]["state"], "running");
}

/// A failed turn's `error` over the API is the message, not "Error: …" after a field already
/// named `error` (#40), plain and streamed.
#[tokio::test]
async fn a_failed_turn_answers_502_with_the_plain_message() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(|_| Reply::Status {
        status: 401,
        body: "{\"error\": {\"message\": \"bad key\"}}".to_owned(),
        retry_after: None,
    });
    let gw = Gateway::start(&llm.url(), "", &[]).await;
    let (status, body) = gw.say("keys", "hello").await;
    assert_eq!(status, 502, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(error.starts_with("the LLM rejected the API key"), "{body}");
    let streamed = gw
        .http
        .post(format!("{}/v1/sessions/keys/messages", gw.base))
        .bearer_auth(TOKEN)
        .header("Accept", "text/event-stream")
        .json(&serde_json::json!({ "text": "hello again" }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = sse_events(&streamed);
    let (name, data) = events.last().unwrap();
    assert_eq!(name, "error", "{streamed}");
    assert!(
        data["error"]
            .as_str()
            .unwrap()
            .starts_with("the LLM rejected"),
        "{streamed}"
    );
}

/// The pieces of a reply whose tool call is written into the text as `<tool_call>` markup,
/// cut inside the tags and the JSON.
const MARKUP_PIECES: [&str; 7] = [
    "Looking: a <",
    " b, so <",
    "tool",
    "_c",
    "all>\n{\"name\": \"list_files\", ",
    "\"arguments\": {\"path\": \".\"}}\n</tool_",
    "call>",
];

/// An SSE body of Chat Completions chunks, one per piece of `content`, then `stop`.
fn chat_pieces(pieces: &[&str]) -> Reply {
    let mut body = String::new();
    for piece in pieces {
        let chunk = serde_json::json!({"object": "chat.completion.chunk", "model": "scripted-model",
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]});
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    let stop = serde_json::json!({"object": "chat.completion.chunk", "model": "scripted-model",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    body.push_str(&format!("data: {stop}\n\ndata: [DONE]\n\n"));
    Reply::Raw {
        content_type: "text/event-stream".to_owned(),
        body,
    }
}

/// An SSE body of Responses API events, one `output_text.delta` per piece, then completed.
fn responses_pieces(pieces: &[&str]) -> Reply {
    let mut body = String::new();
    for piece in pieces {
        let event = serde_json::json!({"type": "response.output_text.delta", "item_id": "msg_1",
            "output_index": 0, "content_index": 0, "delta": piece});
        body.push_str(&format!(
            "event: response.output_text.delta\ndata: {event}\n\n"
        ));
    }
    let done = serde_json::json!({"type": "response.completed", "response": {"status": "completed",
        "usage": {"input_tokens": 20, "output_tokens": 9}}});
    body.push_str(&format!("event: response.completed\ndata: {done}\n\n"));
    Reply::Raw {
        content_type: "text/event-stream".to_owned(),
        body,
    }
}

/// A model that writes its tool call into its text as `<tool_call>` markup, in fragments: the
/// streaming client never receives a byte of the markup, while a lone `<` in ordinary text
/// still streams once the next piece shows it is text; the call really runs. For Chat
/// Completions and the Responses API (a local server's, which passes the markup through).
/// See: #36
#[tokio::test]
async fn issue_36_tool_call_markup_never_reaches_a_streaming_client() {
    let llm = ScriptedLlm::start().await;
    let chat = Gateway::start(&llm.url(), "", &[]).await;
    llm.enqueue(chat_pieces(&MARKUP_PIECES));
    llm.enqueue(Reply::Text("All listed.".into()));
    markup_is_held_back(&chat, &llm, "chat").await;
    let responses = Gateway::start_yaml(
        &TestConfig::new(&llm.url())
            .api_key("test-key")
            .provider_line("api: responses")
            .no_heartbeat()
            .yaml(),
    )
    .await;
    llm.enqueue(responses_pieces(&MARKUP_PIECES));
    llm.enqueue(responses_pieces(&["All ", "listed."]));
    markup_is_held_back(&responses, &llm, "responses").await;
}

/// Asks `gw` over SSE and checks what the client received (see the test above).
async fn markup_is_held_back(gw: &Gateway, llm: &ScriptedLlm, api: &str) {
    let before = llm.request_count();
    let events = gw.say_streamed("alice", "list them").await;
    let deltas = deltas(&events);
    let shown = deltas.concat();
    for markup in ["tool", "_c", "all>", "{", "}", "name", "</"] {
        assert!(
            !shown.contains(markup),
            "{api}: {markup:?} shown: {deltas:?}"
        );
    }
    assert!(
        shown.starts_with("Looking: a < b, so "),
        "{api}: {deltas:?}"
    );
    assert!(shown.contains("All listed."), "{api}: {deltas:?}");
    assert!(deltas.iter().any(|d| d.contains('<')), "{api}: {deltas:?}");
    // The markup was a call that really ran: its result went back to the model.
    let requests = llm.requests();
    assert_eq!(requests.len(), before + 2, "{api}: {requests:?}");
    let sent = requests[before + 1].to_string();
    assert!(sent.contains("list_files"), "{api}: {sent}");
    assert!(
        sent.contains("\"tool_call_id\"") || sent.contains("function_call_output"),
        "{api}: {sent}"
    );
}
