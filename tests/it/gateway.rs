//! The real `squidbot gateway` binary end to end: the HTTP message API (plain and streamed),
//! auth, ordering across 20 concurrent sessions, /status and /metrics, a crashing channel
//! restarted while others answer, SIGTERM in the middle of a turn, and SIGTERM while a
//! sub-agent started by a finished turn is still running.

use std::time::Duration;

use serde_json::Value;

use crate::daemon::{Gateway, TOKEN, sse_events};
use crate::harness::{default_reply, system_text};
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
    let response = gw
        .http
        .post(format!("{}/v1/sessions/alice/messages", gw.base))
        .bearer_auth(TOKEN)
        .header("accept", "text/event-stream")
        .json(&serde_json::json!({ "text": "stream please" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = sse_events(&response.text().await.unwrap());
    let deltas: String = events
        .iter()
        .filter(|(n, _)| n == "delta")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "streamed answer here");
    assert!(
        events.iter().filter(|(n, _)| n == "delta").count() > 1,
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
    let events = gw
        .http
        .get(format!("{}/v1/sessions/mallory/events", gw.base))
        .send()
        .await
        .unwrap();
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
    llm.set_handler(|request| Reply::Delay {
        ms: 20,
        then: Box::new(default_reply(request)),
    });
    let gw = std::sync::Arc::new(Gateway::start(&llm.url(), "", &[]).await);
    // All 20 sessions run at once; within a session a client sends its next message when the
    // previous one is answered (separate HTTP requests have no order of their own).
    let started = std::time::Instant::now();
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
    for task in tasks {
        task.await.unwrap();
    }
    // 100 turns of >= 20 ms each: serial handling would need >= 2 s.
    assert!(
        started.elapsed() < Duration::from_millis(1_900),
        "sessions ran in parallel: {:?}",
        started.elapsed()
    );
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
    let ready = gw
        .http
        .get(format!("{}/readyz", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);

    // #35 item 5: usage and activity only with the token; and no route answers a request
    // that names another host (a DNS-rebinding page), health included.
    let bare = gw
        .http
        .get(format!("{}/metrics", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 401);
    assert!(!bare.text().await.unwrap().contains("squidbot_"));
    for path in ["/healthz", "/status", "/metrics"] {
        let rebound = gw
            .http
            .get(format!("{}{path}", gw.base))
            .header("Host", "rebind.attacker.example:8765")
            .bearer_auth(crate::daemon::TOKEN)
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
    let cron = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_squidbot"))
            .arg("cron")
            .args(args)
            .env("SQUIDBOT_HOME", gw.home())
            .env_remove("SQUIDBOT_CONFIG")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    // Another process (the CLI) edits the job store while the gateway runs.
    cron(&[
        "add",
        "ping",
        "say pong",
        "every 1",
        "--target",
        "http:inbox",
    ]);
    cron(&[
        "add",
        "lost",
        "nobody hears this",
        "every 1",
        "--target",
        "matrix:!room:example.org",
    ]);

    let mut events = gw
        .http
        .get(format!("{}/v1/sessions/inbox/events", gw.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let mut body = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    while !body.contains("event: message") {
        let chunk = tokio::time::timeout_at(deadline, events.chunk())
            .await
            .expect("a cron message within 40 s");
        body.push_str(&String::from_utf8_lossy(&chunk.unwrap().unwrap()));
    }
    let first = sse_events(&body)
        .into_iter()
        .find(|(n, _)| n == "message")
        .unwrap();
    assert_eq!(first.1["text"], "re: say pong");

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

/// A second gateway on a port the first one holds stops at once with the reason (#40),
/// instead of retrying the bind forever without HTTP while the first answers.
#[tokio::test]
async fn a_second_gateway_on_a_taken_port_exits_with_the_reason() {
    let llm = ScriptedLlm::start().await;
    let first = Gateway::start(&llm.url(), "", &[]).await;
    let address = first.base.trim_start_matches("http://").to_owned();
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "llm:\n  providers:\n    local:\n      api_base: \"{}\"\n  models:\n    small:\n      provider: local\n      model: m\n  pools:\n    default: [small]\nagents:\n  heartbeat:\n    enabled: false\ngateway:\n  http:\n    listen: {address}\n    token: {TOKEN}\n",
        llm.url()
    );
    std::fs::write(home.path().join("squidbot.yaml"), config).unwrap();
    let second = tokio::process::Command::new(env!("CARGO_BIN_EXE_squidbot"))
        .arg("gateway")
        .env("SQUIDBOT_HOME", home.path())
        .env("HOME", home.path())
        .env_remove("SQUIDBOT_CONFIG")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), second)
        .await
        .expect("the second gateway kept running on a taken port")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {address} (gateway.http.listen)"))
            && stderr.contains("another squidbot gateway answers"),
        "{stderr}"
    );
    // The first one never noticed.
    assert_eq!(
        first.get_json("/status").await["channels"]["http"]["state"],
        "running"
    );
}

/// SIGTERM past the grace period (#40): the streaming client gets a last `error` event saying
/// why, the call cut short is in the usage ledger, and the exit is non-zero.
#[tokio::test]
async fn sigterm_past_the_grace_period_tells_the_client_records_the_call_and_fails() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(|_| Reply::Stall {
        text: "a long answer begins".to_owned(),
        for_ms: 60_000,
    });
    let url = llm.url();
    let mut gw = Gateway::start_with_config(
        move |port| {
            format!(
                "llm:\n  providers:\n    local:\n      api_base: \"{url}\"\n  models:\n    small:\n      provider: local\n      model: scripted-model\n  pools:\n    default: [small]\n  retry:\n    max_retries: 0\nagents:\n  heartbeat:\n    enabled: false\ngateway:\n  shutdown_grace_seconds: 1\n  http:\n    listen: 127.0.0.1:{port}\n    token: {TOKEN}\n"
            )
        },
        &[],
        std::process::Stdio::piped(),
    )
    .await;
    let mut stream = gw
        .http
        .post(format!("{}/v1/sessions/cut/messages", gw.base))
        .bearer_auth(TOKEN)
        .header("Accept", "text/event-stream")
        .json(&serde_json::json!({ "text": "tell me everything" }))
        .send()
        .await
        .unwrap();
    while llm.request_count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The provider has begun answering (its first words are on the wire).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut seen = String::new();
    let ledger = gw.home().join("usage");
    let recorded = || {
        std::fs::read_dir(&ledger)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| std::fs::read_to_string(entry.path()).unwrap_or_default())
            .collect::<String>()
    };
    assert!(
        !recorded().contains("\"session\":\"http:cut\""),
        "nothing recorded yet"
    );

    assert_eq!(
        gw.terminate().await,
        Some(1),
        "turns were cut: not a clean stop"
    );
    while let Ok(Some(chunk)) = stream.chunk().await {
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let events = sse_events(&seen);
    let (name, data) = events.last().expect("events");
    assert_eq!(name, "error", "{seen}");
    assert!(
        data["error"]
            .as_str()
            .unwrap()
            .contains("grace period ran out"),
        "{data}"
    );
    assert!(
        recorded().contains("\"session\":\"http:cut\"")
            && recorded().contains("\"estimated\":true"),
        "the call cut short is in the ledger: {}",
        recorded()
    );
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
