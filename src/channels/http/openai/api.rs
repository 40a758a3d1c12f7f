//! The endpoint's routes, token check and answer shapes.
//!
//! `POST /v1/chat/completions` answers as OpenAI does: a `chat.completion` object, or with
//! `"stream": true` server-sent `chat.completion.chunk`s (the role first, then the text, then
//! the finish reason, then the usage when `stream_options.include_usage` asks, then `[DONE]`).
//! A failure before any text is an error body (a status for a plain answer, an `error` event in
//! a stream); after some text it ends the text, as a chat channel says it. The usage given to
//! the app is an estimate from the text's length: the turn's real calls (several with tools,
//! some cached) are in squidbot's ledger under the conversation's session.
//! `GET /v1/models` lists the configured pools and models; choosing one in the app is `/model`
//! for that conversation.
//!
//! Every request needs the HTTP API's bearer token; a wrong one is an OpenAI-style 401, checked
//! before anything is read.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::stream::{self, StreamExt};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use tokio::sync::mpsc;

use super::Endpoint;
use super::error::{ApiError, ErrorKind};
use super::request::{self, ChatRequest, Image, MAX_BODY};
use super::thread::{CONVERSATION_HEADERS, Kind};
use super::turn::{self, Exchange, Out, Running};
use crate::approval;
use crate::core::conversation::DEFAULT_WORD;
use crate::core::ports::channel::TurnResult;
use crate::core::ports::models::ModelKind;
use crate::core::session::SessionId;
use crate::gateway::command::ChatCommand;

/// What the message of a regenerate is recorded with.
const REGENERATE_NOTE: &str =
    "[The person asked for another answer to this message, which you answered before.]";
/// What the message of an edit is recorded with.
const EDIT_NOTE: &str = "[The person went back in the conversation and wrote this in place of \
                         what followed; what was said after that point is off their screen.]";

/// The routes of `endpoint`.
pub fn router<S: Clone + Send + Sync + 'static>(endpoint: Endpoint) -> axum::Router<S> {
    let endpoint = Arc::new(endpoint);
    axum::Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .layer(middleware::from_fn_with_state(
            endpoint.clone(),
            require_token,
        ))
        // The body is read under this endpoint's own limit (a photo is megabytes).
        .layer(DefaultBodyLimit::disable())
        .with_state(endpoint)
}

async fn require_token(
    State(endpoint): State<Arc<Endpoint>>,
    request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let expected = endpoint.token.as_bytes();
    if expected.is_empty() || !bool::from(given.as_bytes().ct_eq(expected)) {
        return ApiError::new(
            ErrorKind::Unauthorized,
            "missing or wrong API key (the HTTP API's bearer token)",
        )
        .into_response();
    }
    next.run(request).await
}

/// The models as `GET /v1/models` lists them.
fn model_list(endpoint: &Endpoint) -> Vec<Value> {
    let Some(conversations) = &endpoint.conversations else {
        return vec![model_json(DEFAULT_WORD, "squidbot")];
    };
    let catalog = conversations.catalog();
    let mut list = vec![model_json(
        catalog.default_name(),
        "squidbot pool (default)",
    )];
    for entry in catalog.entries() {
        if entry.name == catalog.default_name() {
            continue;
        }
        let owner = match entry.kind {
            ModelKind::Pool => "squidbot pool",
            ModelKind::Model => "squidbot model",
        };
        list.push(model_json(&entry.name, owner));
    }
    list
}

fn model_json(id: &str, owned_by: &str) -> Value {
    json!({ "id": id, "object": "model", "created": 0, "owned_by": owned_by })
}

async fn models(State(endpoint): State<Arc<Endpoint>>) -> Json<Value> {
    Json(json!({ "object": "list", "data": model_list(&endpoint) }))
}

async fn model(State(endpoint): State<Arc<Endpoint>>, Path(id): Path<String>) -> Response {
    match model_list(&endpoint)
        .into_iter()
        .find(|m| m["id"] == id.as_str())
    {
        Some(model) => Json(model).into_response(),
        None => unknown_model(&id).into_response(),
    }
}

fn unknown_model(name: &str) -> ApiError {
    ApiError {
        param: Some("model".into()),
        ..ApiError::new(
            ErrorKind::UnknownModel,
            format!(
                "the model {name:?} is not configured; GET /v1/models lists the pools and models"
            ),
        )
    }
}

/// Makes `name` the model of `key`'s conversation, as `/model` does, unless it is already.
fn choose_model(endpoint: &Endpoint, key: &SessionId, name: &str) -> Result<(), ApiError> {
    let Some(conversations) = &endpoint.conversations else {
        return Ok(());
    };
    let catalog = conversations.catalog();
    let wanted = (name != catalog.default_name() && name != DEFAULT_WORD).then_some(name);
    if let Some(name) = wanted
        && (catalog.client(name).is_none() || !catalog.entries().iter().any(|e| e.name == name))
    {
        return Err(unknown_model(name));
    }
    let session = conversations.current(key);
    if conversations.model(&session).as_deref() != wanted
        && let Err(error) = conversations.switch_model(key, wanted.unwrap_or(DEFAULT_WORD))
    {
        tracing::warn!(session = %key, error = %error, "The model an app chose could not be saved; this message uses it anyway only if it was saved.");
    }
    Ok(())
}

async fn completions(
    State(endpoint): State<Arc<Endpoint>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // A declared length over the limit is refused before a byte of it is read.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let body = match declared {
        Some(length) if length > MAX_BODY as u64 => Err(()),
        _ => axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| ()),
    };
    let body = match body {
        Ok(body) => body,
        Err(_) => {
            return ApiError::too_large(format!(
                "the body is larger than {} MiB",
                MAX_BODY / (1024 * 1024)
            ))
            .into_response();
        }
    };
    let request = match request::parse(&body) {
        Ok(request) => request,
        Err(error) => return error.into_response(),
    };
    drop(body);
    match answer(endpoint, &headers, request).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn answer(
    endpoint: Arc<Endpoint>,
    headers: &HeaderMap,
    mut request: ChatRequest,
) -> Result<Response, ApiError> {
    let named = CONVERSATION_HEADERS
        .iter()
        .find_map(|name| headers.get(*name))
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|value| !value.is_empty());
    let found = endpoint.kept.threads.find(&request, named);
    let key = SessionId::new("http", &found.key)
        .map_err(|error| ApiError::invalid(error.to_string(), None))?;
    choose_model(&endpoint, &key, &request.model)?;
    endpoint.liveness.inbound();
    let user = request.text().to_owned();
    let exchange = Exchange {
        found,
        key: key.clone(),
        user: user.clone(),
    };
    let (out, received) = mpsc::unbounded_channel();
    match endpoint.unpark(&key) {
        Some(parked) => {
            let started = parked_answer(&endpoint, &key, parked, &user).await?;
            match started {
                Parked::Resumed(running, prefix) => {
                    endpoint.tasks.spawn(turn::drive(
                        endpoint.clone(),
                        exchange,
                        running,
                        prefix,
                        out,
                    ));
                }
                Parked::Waiting(reminder) => {
                    endpoint
                        .kept
                        .threads
                        .record(&exchange.found, &user, &reminder)
                        .await;
                    let _ = out.send(Out::Text(reminder));
                    let _ = out.send(Out::End(Ok(())));
                }
                Parked::Apart(running) => {
                    endpoint.tasks.spawn(turn::drive(
                        endpoint.clone(),
                        exchange,
                        running,
                        String::new(),
                        out,
                    ));
                }
            }
        }
        None => {
            let images = std::mem::take(&mut request.images);
            let (text, paths) = message_text(&endpoint, &key, &exchange, images).await;
            let running = turn::submit(
                endpoint.dispatch.as_ref(),
                &endpoint.tasks,
                key.clone(),
                text,
                paths,
            )?;
            endpoint.tasks.spawn(turn::drive(
                endpoint.clone(),
                exchange,
                running,
                String::new(),
                out,
            ));
        }
    }
    let id = format!("chatcmpl-{:016x}", fastrand::u64(..));
    let created = chrono::Utc::now().timestamp();
    let reply = Reply {
        id,
        created,
        model: request.model.clone(),
        prompt_tokens: estimate_tokens(&user),
    };
    if request.stream {
        Ok(stream(reply, request.include_usage, received).into_response())
    } else {
        whole(reply, received).await
    }
}

/// What the message to a conversation with a parked turn starts.
enum Parked {
    /// The approval was answered: the parked turn goes on, its answer after this text.
    Resumed(Running, String),
    /// The turn still waits; the person is told how to answer (nothing was submitted).
    Waiting(String),
    /// A chat command, answered beside the waiting turn.
    Apart(Running),
}

/// Handles `text`, sent to `key`'s conversation while `parked` waits for an approval.
async fn parked_answer(
    endpoint: &Endpoint,
    key: &SessionId,
    mut parked: Running,
    text: &str,
) -> Result<Parked, ApiError> {
    let session = match &endpoint.conversations {
        Some(conversations) => conversations.current(key),
        None => key.clone(),
    };
    let answers = approval::parse_answer(text).filter(|(_, code)| {
        endpoint
            .approvals
            .as_ref()
            .is_some_and(|approvals| approvals.is_open_code(&session, code))
    });
    let submit = |text: &str| {
        turn::submit(
            endpoint.dispatch.as_ref(),
            &endpoint.tasks,
            key.clone(),
            text.to_owned(),
            Vec::new(),
        )
    };
    if answers.is_some() {
        let mut answered = match submit(text) {
            Ok(answered) => answered,
            Err(error) => {
                endpoint.park(key.clone(), parked);
                return Err(error);
            }
        };
        let told = answered.result().await;
        let prefix = match told {
            TurnResult::Replied(told) => format!("{told}\n\n"),
            TurnResult::Failed(failure) => format!("{}\n\n", failure.told),
            TurnResult::Dropped | TurnResult::Replaced => String::new(),
        };
        let _ = parked.ended();
        return Ok(Parked::Resumed(parked, prefix));
    }
    endpoint.park(key.clone(), parked);
    if ChatCommand::parse(text).is_some() {
        return submit(text).map(Parked::Apart);
    }
    Ok(Parked::Waiting(
        "A command is still waiting for your approval: answer with `yes CODE` or `no CODE` \
         (the code is in the question above), or send /stop to cancel it."
            .to_owned(),
    ))
}

/// The text submitted for the app's new message: marked as a regenerate or an edit when it is
/// one, with the images saved as attachments and named in it; returns it with their paths.
async fn message_text(
    endpoint: &Endpoint,
    key: &SessionId,
    exchange: &Exchange,
    images: Vec<Image>,
) -> (String, Vec<String>) {
    let user = &exchange.user;
    let plain = ChatCommand::parse(user).is_some() || approval::parse_answer(user).is_some();
    let mut text = match exchange.found.kind {
        _ if plain => user.clone(),
        Kind::Next => user.clone(),
        Kind::Regenerate => format!("{REGENERATE_NOTE}\n{user}"),
        Kind::Edit => format!("{EDIT_NOTE}\n{user}"),
    };
    let mut paths = Vec::new();
    for (n, image) in images.into_iter().enumerate() {
        let extension = image.media_type.rsplit('/').next().unwrap_or("img");
        let name = format!("image-{}.{extension}", n + 1);
        let store = endpoint.kept.attachments.clone();
        let session = key.clone();
        let day = chrono::Local::now().date_naive();
        let saved =
            tokio::task::spawn_blocking(move || store.save(&session, day, &name, &image.bytes))
                .await;
        let line = match saved {
            Ok(Ok(path)) => {
                let line = format!(
                    "[attachment: image-{} ({})] → {}",
                    n + 1,
                    image.media_type,
                    path.display()
                );
                paths.push(path.display().to_string());
                line
            }
            Ok(Err(error)) => format!("[attachment not saved: image-{} ({error})]", n + 1),
            Err(error) => format!("[attachment not saved: image-{} ({error})]", n + 1),
        };
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&line);
    }
    (text, paths)
}

/// The fields every answer of one request repeats.
#[derive(Clone)]
struct Reply {
    id: String,
    created: i64,
    model: String,
    prompt_tokens: usize,
}

impl Reply {
    fn usage(&self, text: &str) -> Value {
        let completion = estimate_tokens(text);
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        })
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish, "logprobs": null }],
        })
    }
}

/// About four characters a token, as the apps show it.
fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Waits for the whole answer.
async fn whole(
    reply: Reply,
    mut received: mpsc::UnboundedReceiver<Out>,
) -> Result<Response, ApiError> {
    let mut text = String::new();
    loop {
        match received.recv().await {
            Some(Out::Text(piece)) => text.push_str(&piece),
            Some(Out::End(Ok(()))) => break,
            Some(Out::End(Err(error))) => return Err(error),
            None => return Err(turn::shutting_down()),
        }
    }
    Ok(Json(json!({
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": text, "refusal": null },
            "finish_reason": "stop",
            "logprobs": null,
        }],
        "usage": reply.usage(&text),
    }))
    .into_response())
}

/// The answer as server-sent chunks. Comments keep the connection busy while a tool runs, so
/// a client that left is noticed (and its turn stopped) within seconds.
fn stream(
    reply: Reply,
    include_usage: bool,
    received: mpsc::UnboundedReceiver<Out>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let data = |value: Value| Event::default().data(value.to_string());
    let first = data(reply.chunk(json!({ "role": "assistant", "content": "" }), None));
    let state = (received, String::new(), false);
    let rest = stream::unfold(state, move |(mut received, mut text, done)| {
        let reply = reply.clone();
        async move {
            if done {
                return None;
            }
            let events = match received.recv().await {
                Some(Out::Text(piece)) => {
                    text.push_str(&piece);
                    vec![data(reply.chunk(json!({ "content": piece }), None))]
                }
                Some(Out::End(Ok(()))) => {
                    let mut events = vec![data(reply.chunk(json!({}), Some("stop")))];
                    if include_usage {
                        let mut usage = reply.chunk(json!({}), None);
                        usage["choices"] = json!([]);
                        usage["usage"] = reply.usage(&text);
                        events.push(data(usage));
                    }
                    events.push(Event::default().data("[DONE]"));
                    return Some((events, (received, text, true)));
                }
                Some(Out::End(Err(error))) => {
                    return Some((vec![data(error.body())], (received, text, true)));
                }
                None => {
                    return Some((
                        vec![data(turn::shutting_down().body())],
                        (received, text, true),
                    ));
                }
            };
            Some((events, (received, text, false)))
        }
    });
    let events = stream::iter([Ok(first)])
        .chain(rest.flat_map(|events| stream::iter(events.into_iter().map(Ok))));
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(5)))
}
