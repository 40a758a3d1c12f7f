//! The axum router of the HTTP API and its handlers.
//!
//! Health routes (`/healthz`, `/readyz`) are open, as the listener is on loopback by default,
//! and `/status` shows only health (version, uptime, channel states, the sandbox) unless the
//! request carries the token: sessions, cron jobs, pending approvals and usage say what the
//! owner does, and any local user or a page's script could ask. `/metrics` (usage, activity
//! per channel) and the message routes under `/v1` need the token: they exist only when one
//! is configured and answer 401 to a missing or wrong `Authorization: Bearer` header before
//! touching anything.
//!
//! Every route also checks `Host` ([`require_host`]): a web page the owner visits can point
//! its own domain name at 127.0.0.1 (DNS rebinding) and then read the API as a same-origin
//! page, but its requests carry that domain name. Only an IP literal or `localhost` is
//! answered; anything else gets 421.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use subtle::ConstantTimeEq;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::hub::{HttpHub, HubEvent, approval_json};
use super::openai;
use super::sse::{SseSink, event};
use crate::approval::{Approvals, Decision, ResolveError};
use crate::core::audience::Readers;
use crate::core::conversation::Conversations;
use crate::core::origin::Origin;
use crate::core::ports::approvals::ApprovalRequest;
use crate::core::ports::channel::{
    Alive, DeliveryError, Dispatch, FailureKind, Inbound, ReplySink, TurnResult,
};
use crate::core::session::SessionId;
use crate::gateway::GatewayState;

/// The largest request body accepted.
const MAX_BODY: usize = 1024 * 1024;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub dispatch: Arc<dyn Dispatch>,
    pub state: Arc<GatewayState>,
    pub hub: Arc<HttpHub>,
    pub token: Option<Arc<str>>,
    pub shutdown: CancellationToken,
    /// The gateway's background tasks (see `ChannelContext::tasks`).
    pub tasks: TaskTracker,
    /// Where accepted messages are reported as inbound events.
    pub liveness: Arc<dyn Alive>,
    /// Where approval answers go.
    pub approvals: Option<Arc<Approvals>>,
    /// The API session ids' current sessions (see `HttpSettings::conversations`).
    pub conversations: Option<Arc<Conversations>>,
    /// The OpenAI-compatible endpoint, if on (see `HttpSettings::openai`).
    pub openai: Option<Arc<openai::OpenAiEndpoint>>,
}

/// The router for `app`.
pub fn router(app: AppState) -> axum::Router {
    let operator = axum::Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/status", get(status));
    let api = axum::Router::new()
        .route("/metrics", get(metrics))
        .route("/v1/sessions/{id}/messages", post(message))
        .route("/v1/sessions/{id}/events", get(events))
        .route("/v1/sessions/{id}/approvals/{approval}", post(approval))
        .layer(middleware::from_fn_with_state(app.clone(), require_token))
        .layer(DefaultBodyLimit::max(MAX_BODY));
    let routes = match (&app.token, &app.openai) {
        (Some(token), Some(openai)) => {
            operator.merge(api).merge(openai::router(openai::Endpoint {
                kept: openai.clone(),
                dispatch: app.dispatch.clone(),
                tasks: app.tasks.clone(),
                liveness: app.liveness.clone(),
                token: token.clone(),
                approvals: app.approvals.clone(),
                conversations: app.conversations.clone(),
            }))
        }
        (Some(_), None) => operator.merge(api),
        (None, _) => operator,
    };
    routes
        .layer(middleware::from_fn(require_host))
        .with_state(app)
}

/// Refuses a request whose `Host` is a domain name other than `localhost` (see the module
/// docs: DNS rebinding). HTTP/1.1 requires the header; a request without one is refused too.
async fn require_host(request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if host.is_some_and(local_host) {
        return next.run(request).await;
    }
    tracing::warn!(host = ?host, "HTTP request refused: its Host is not an address or localhost.");
    (
        StatusCode::MISDIRECTED_REQUEST,
        Json(json!({ "error": "the Host header must be an IP address or localhost" })),
    )
        .into_response()
}

/// Whether `host` (`name[:port]`, `[v6][:port]`) names an IP address or `localhost`.
fn local_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => {
            return rest.split_once(']').is_some_and(|(v6, port)| {
                v6.parse::<std::net::Ipv6Addr>().is_ok() && (port.is_empty() || valid_port(port))
            });
        }
        None => match host.rsplit_once(':') {
            Some((name, port)) if valid_port(&format!(":{port}")) => name,
            Some(_) => return false,
            None => host,
        },
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::Ipv4Addr>().is_ok()
}

/// Whether `port` is `:` and a port number.
fn valid_port(port: &str) -> bool {
    port.strip_prefix(':')
        .is_some_and(|digits| digits.parse::<u16>().is_ok())
}

async fn readyz(State(app): State<AppState>) -> Response {
    let waiting = app.state.not_ready();
    if waiting.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "not_ready": waiting })),
        )
            .into_response()
    }
}

async fn status(State(app): State<AppState>, headers: HeaderMap) -> Json<serde_json::Value> {
    if has_token(&app, &headers) {
        Json(app.state.snapshot().await)
    } else {
        Json(app.state.health().await)
    }
}

/// Whether `headers` carry the configured bearer token (never, when none is configured).
fn has_token(app: &AppState, headers: &HeaderMap) -> bool {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let expected = app.token.as_deref().unwrap_or("");
    !expected.is_empty() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

async fn metrics(State(app): State<AppState>) -> Response {
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    (
        [(header::CONTENT_TYPE, content_type)],
        app.state.render_metrics(),
    )
        .into_response()
}

async fn require_token(State(app): State<AppState>, request: Request, next: Next) -> Response {
    if !has_token(&app, request.headers()) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            Json(json!({ "error": "missing or wrong bearer token" })),
        )
            .into_response();
    }
    next.run(request).await
}

/// The body of `POST /v1/sessions/{id}/messages`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    text: String,
}

/// Reads a body that must be a JSON object. A derived `Deserialize` also accepts a struct
/// written as an array of its fields (`["hi"]`), which is not the documented API, so the body
/// must start as an object; it is then read straight into `T`, whose derived `Deserialize`
/// refuses a key given twice (`{"text":"a","text":"b"}`), where going through a generic map
/// would keep the last.
fn object_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err("the body must be a JSON object".into());
    }
    serde_json::from_slice(body).map_err(|error| error.to_string())
}

fn bad_request(message: impl std::fmt::Display) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({ "error": message.to_string() })),
    )
        .into_response()
}

fn session_of(id: &str) -> Result<SessionId, Box<Response>> {
    SessionId::new("http", id).map_err(|error| Box::new(bad_request(error)))
}

/// A sink that discards output (the JSON answer is built from the turn's result) and posts
/// approval requests to the session's `events` stream, handing the first to the waiting
/// `POST` too, which then answers at once with the question instead of hanging until the
/// client gives up.
struct QuietSink {
    hub: Arc<HttpHub>,
    session: SessionId,
    asked: std::sync::Mutex<Option<oneshot::Sender<ApprovalRequest>>>,
}

#[async_trait::async_trait]
impl ReplySink for QuietSink {
    async fn deliver(&self, _text: &str) -> Result<(), DeliveryError> {
        Ok(())
    }

    async fn ask(&self, request: &ApprovalRequest) -> Result<bool, DeliveryError> {
        self.hub
            .post_event(&self.session, HubEvent::approval(&self.session, request));
        let waiting = self.asked.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(waiting) = waiting {
            let _ = waiting.send(request.clone());
        }
        Ok(true)
    }
}

async fn message(
    State(app): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let session = match session_of(&id) {
        Ok(session) => session,
        Err(response) => return *response,
    };
    let body: MessageBody = match object_body(&body) {
        Ok(body) => body,
        Err(error) => return bad_request(format!("expected {{\"text\": \"...\"}}: {error}")),
    };
    if body.text.trim().is_empty() {
        return bad_request("text is empty");
    }
    app.liveness.inbound();
    let wants_stream = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if wants_stream {
        return stream_reply(app, session, body.text).into_response();
    }
    let (asked, question) = oneshot::channel();
    let sink = QuietSink {
        hub: app.hub.clone(),
        session: session.clone(),
        asked: std::sync::Mutex::new(Some(asked)),
    };
    // The API is the owner's: whoever holds its token holds the owner's rights.
    let inbound = Inbound::new(
        session.clone(),
        body.text,
        Origin::owner_as("http"),
        Arc::new(sink),
    )
    .read_by(Readers::Owner);
    let Ok(mut done) = app.dispatch.submit(inbound) else {
        return unavailable();
    };
    tokio::select! {
        result = &mut done => match result {
            Ok(TurnResult::Replied(reply)) => Json(json!({ "reply": reply })).into_response(),
            Ok(TurnResult::Failed(failure)) => {
                (failure_status(failure.kind), Json(json!({ "error": api_error(&failure.told) }))).into_response()
            }
            Ok(TurnResult::Dropped | TurnResult::Replaced) | Err(_) => unavailable(),
        },
        Ok(request) = question => {
            // The turn waits for the owner; the reply goes to the session's events.
            let hub = app.hub.clone();
            let events = format!("/v1/sessions/{}/events", session.key());
            let approval = approval_json(&session, &request);
            app.tasks.spawn(async move {
                let outcome = match done.await {
                    Ok(TurnResult::Replied(reply)) => HubEvent::outcome("reply", json!({ "reply": reply })),
                    Ok(TurnResult::Failed(failure)) => HubEvent::outcome("error", json!({ "error": api_error(&failure.told) })),
                    Ok(TurnResult::Dropped | TurnResult::Replaced) | Err(_) => {
                        HubEvent::outcome("error", json!({ "error": "squidbot is shutting down" }))
                    }
                };
                hub.post_event(&session, outcome);
            });
            (
                StatusCode::ACCEPTED,
                Json(json!({
                    "approval": approval,
                    "events": events,
                    "note": "The command waits for the owner's answer; answer it with the \
                             approval's `answer`, then read the reply as a `reply` event on \
                             `events`.",
                })),
            )
                .into_response()
        }
    }
}

/// The body of `POST /v1/sessions/{id}/approvals/{approval_id}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalBody {
    decision: DecisionBody,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum DecisionBody {
    Approve,
    Deny,
}

/// Answers an approval request of the session: 200 when it was open, 409 when it was answered
/// already (the first answer stands), 410 when it expired, 404 when no such request exists.
async fn approval(
    State(app): State<AppState>,
    Path((id, approval)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let session = match session_of(&id) {
        Ok(session) => session,
        Err(response) => return *response,
    };
    let body: ApprovalBody = match object_body(&body) {
        Ok(body) => body,
        Err(error) => {
            let expected = r#"expected {"decision": "approve"} or {"decision": "deny"}"#;
            return bad_request(format!("{expected}: {error}"));
        }
    };
    let decision = match body.decision {
        DecisionBody::Approve => Decision::Approve,
        DecisionBody::Deny => Decision::Deny,
    };
    let Some(approvals) = &app.approvals else {
        return error_status(StatusCode::NOT_FOUND, ResolveError::Unknown);
    };
    let session = match &app.conversations {
        Some(conversations) => conversations.current(&session),
        None => session,
    };
    match approvals.resolve_id(&session, &approval, decision) {
        Ok(request) => {
            tracing::info!(session = %session, ?decision, "Approval answered over HTTP.");
            let decision = match decision {
                Decision::Approve => "approve",
                Decision::Deny => "deny",
            };
            Json(json!({ "id": request.id, "decision": decision })).into_response()
        }
        Err(error @ ResolveError::Expired) => error_status(StatusCode::GONE, error),
        Err(error @ ResolveError::AlreadyDecided(_)) => error_status(StatusCode::CONFLICT, error),
        Err(error) => error_status(StatusCode::NOT_FOUND, error),
    }
}

/// A turn's failure as the API's `error` field: the text a person is told in a chat starts
/// with "Error: ", which an `error` field already says.
/// The HTTP status of a failed turn: the one place a [`FailureKind`] becomes a status.
fn failure_status(kind: FailureKind) -> StatusCode {
    match kind {
        FailureKind::Budget => StatusCode::TOO_MANY_REQUESTS,
        FailureKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
        FailureKind::Llm | FailureKind::Runaway => StatusCode::BAD_GATEWAY,
        FailureKind::Stopping => StatusCode::SERVICE_UNAVAILABLE,
        // Someone else's `/stop` ended the turn this request waited for.
        FailureKind::Cancelled => StatusCode::CONFLICT,
        FailureKind::Storage | FailureKind::Delivery => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn api_error(told: &str) -> &str {
    told.strip_prefix("Error: ").unwrap_or(told)
}

fn error_status(status: StatusCode, error: impl std::fmt::Display) -> Response {
    (status, Json(json!({ "error": error.to_string() }))).into_response()
}

fn unavailable() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({ "error": "squidbot is shutting down" })),
    )
        .into_response()
}

fn stream_reply(
    app: AppState,
    session: SessionId,
    text: String,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let (events, received) = mpsc::unbounded_channel();
    let sink = Arc::new(SseSink::new(
        events.clone(),
        app.hub.clone(),
        session.clone(),
    ));
    let inbound =
        Inbound::new(session, text, Origin::owner_as("http"), sink).read_by(Readers::Owner);
    match app.dispatch.submit(inbound) {
        Ok(done) => {
            app.tasks.spawn(async move {
                let last = match done.await {
                    Ok(TurnResult::Replied(reply)) => event("done", json!({ "reply": reply })),
                    Ok(TurnResult::Failed(failure)) => {
                        event("error", json!({ "error": api_error(&failure.told) }))
                    }
                    Ok(TurnResult::Dropped | TurnResult::Replaced) | Err(_) => {
                        event("error", json!({ "error": "squidbot is shutting down" }))
                    }
                };
                let _ = events.send(last);
            });
        }
        Err(_) => {
            let _ = events.send(event(
                "error",
                json!({ "error": "squidbot is shutting down" }),
            ));
        }
    }
    let stream = stream::unfold(received, |mut received| async move {
        let event = received.recv().await?;
        Some((Ok(event), received))
    });
    Sse::new(stream)
}

async fn events(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    let session = match session_of(&id) {
        Ok(session) => session,
        Err(response) => return *response,
    };
    let (backlog, live) = app.hub.subscribe(&session);
    let replay = stream::iter(
        backlog
            .into_iter()
            .map(|item| Ok::<_, Infallible>(event(item.name, item.data))),
    );
    let live = stream::unfold(live, |mut live| async move {
        loop {
            match live.recv().await {
                Ok(item) => return Some((Ok(event(item.name, item.data)), live)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(skipped = n, "An events reader fell behind.");
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    let shutdown = app.shutdown.clone();
    let stream = replay
        .chain(live)
        .take_until(async move { shutdown.cancelled().await });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::local_host;

    #[test]
    fn only_addresses_and_localhost_are_hosts_of_this_api() {
        for host in [
            "127.0.0.1:8765",
            "127.0.0.1",
            "localhost:8765",
            "LOCALHOST",
            "[::1]:8765",
            "[::1]",
            "10.0.0.5:80",
        ] {
            assert!(local_host(host), "{host}");
        }
        for host in [
            "attacker.example:8765",
            "attacker.example",
            "localhost.attacker.example:8765",
            "127.0.0.1.nip.io:8765",
            "[::1]x",
            "[not-v6]:1",
            "127.0.0.1:99999",
            "",
        ] {
            assert!(!local_host(host), "{host}");
        }
    }
}
