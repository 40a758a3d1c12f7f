//! Gateway fixtures: the scripted model's shell calls, the session's event stream, approval
//! answers and messages sent in the background, shared by the approval suites (HTTP, Matrix,
//! mail) so each asks and answers the gateway the same way.

use std::time::Duration;

use serde_json::{Value, json};

use super::daemon::{Gateway, TOKEN, post_text, sse_events};
use super::scripted_llm::Reply;

/// One shell call as the model's whole round.
pub fn shell(command: &str) -> Reply {
    Reply::ToolCalls {
        text: String::new(),
        calls: vec![(
            "c0".to_owned(),
            "shell".to_owned(),
            json!({ "command": command }).to_string(),
        )],
    }
}

/// A model that answers a message with one shell call of `command`, and the call's result
/// with `result: <the tool result>`.
pub fn shell_then_result(command: &'static str) -> impl Fn(&Value) -> Reply + Send + Sync {
    move |request| {
        let messages = request["messages"].as_array().unwrap();
        let last = messages.last().unwrap();
        if last["role"] == "tool" {
            Reply::Text(format!("result: {}", last["content"].as_str().unwrap()))
        } else {
            shell(command)
        }
    }
}

/// The result of the only tool call answered in `request`.
pub fn last_result(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    let result = messages.iter().rev().find(|m| m["role"] == "tool").unwrap();
    result["content"].as_str().unwrap().to_owned()
}

/// A reader of `GET /v1/sessions/{id}/events`.
pub struct Events {
    response: reqwest::Response,
    pub seen: String,
    taken: usize,
}

impl Events {
    pub async fn open(gw: &Gateway, id: &str) -> Self {
        let response = gw
            .http
            .get(format!("{}/v1/sessions/{id}/events", gw.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        Self {
            response,
            seen: String::new(),
            taken: 0,
        }
    }

    /// Reads what arrives until nothing has for `quiet` (into [`Events::seen`]).
    pub async fn drain(&mut self, quiet: Duration) {
        while let Ok(Ok(Some(chunk))) = tokio::time::timeout(quiet, self.response.chunk()).await {
            self.seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The next event named `name` (within 20 s).
    pub async fn next(&mut self, name: &str) -> Value {
        self.next_within(name, Duration::from_secs(20)).await
    }

    /// The next event named `name` (within `limit`).
    pub async fn next_within(&mut self, name: &str, limit: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let events = sse_events(&self.seen);
            if let Some((index, (_, data))) = events
                .iter()
                .enumerate()
                .skip(self.taken)
                .find(|(_, (n, _))| n == name)
            {
                self.taken = index + 1;
                return data.clone();
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("no {name} event within 20 s; saw {}", self.seen));
            let chunk = chunk.unwrap().expect("the events stream ended");
            self.seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// Answers approval `id` of session `session` over HTTP; the status and body.
pub async fn decide(gw: &Gateway, session: &str, id: &str, body: Value) -> (u16, Value) {
    let response = gw
        .http
        .post(format!("{}/v1/sessions/{session}/approvals/{id}", gw.base))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Sends `text` to `http:<id>` in the background; the turn's (status, body) when it ends.
pub fn say_later(gw: &Gateway, id: &str, text: &str) -> tokio::task::JoinHandle<(u16, Value)> {
    let http = gw.http.clone();
    let url = format!("{}/v1/sessions/{id}/messages", gw.base);
    let text = text.to_owned();
    tokio::spawn(async move { post_text(&http, &url, TOKEN, &text).await })
}
