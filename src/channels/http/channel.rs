//! [`HttpChannel`]: the HTTP listener as a supervised channel.
//!
//! It binds `gateway.http.listen` when the gateway starts ([`HttpChannel::bind`]): an address
//! that is taken (another gateway already answers there) is the gateway's start-up error, not
//! a channel failure retried with backoff forever while nothing answers. Run, it serves the
//! bound socket until shutdown, then stops accepting and lets in-flight requests finish (the
//! router bounds how long turns may take); a restart after a serve failure serves the same
//! socket again.

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::hub::HttpHub;
use super::openai::OpenAiEndpoint;
use super::routes::{AppState, router};
use crate::approval::Approvals;
use crate::core::audience::Readers;
use crate::core::conversation::Conversations;
use crate::core::ports::channel::{Channel, ChannelContext, ChannelError, Outbox};
use crate::core::session::SessionId;
use crate::gateway::GatewayState;

/// What the HTTP channel needs from the configuration.
#[derive(Clone)]
pub struct HttpSettings {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The message API's bearer token; `None` turns the message API off.
    pub token: Option<String>,
    /// Where `POST …/approvals/{id}` answers go.
    pub approvals: Option<Arc<Approvals>>,
    /// Which session an API session id's messages go to now (`/new`), so an approval
    /// answered under the id the client uses finds the request its current session opened.
    pub conversations: Option<Arc<Conversations>>,
    /// The OpenAI-compatible endpoint, when `gateway.http.openai` is on (it needs the token).
    pub openai: Option<Arc<OpenAiEndpoint>>,
}

impl std::fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSettings")
            .field("listen", &self.listen)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Why the HTTP server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listening socket could not be opened.
    #[error(
        "cannot listen on {address} (gateway.http.listen): {error}{}",
        if error.kind() == std::io::ErrorKind::AddrInUse {
            format!("; another program holds it (another squidbot gateway answers `curl http://{address}/readyz`): stop it or choose another port")
        } else {
            String::new()
        }
    )]
    Listen {
        /// The configured address.
        address: SocketAddr,
        /// What the system said.
        error: std::io::Error,
    },
    /// The server failed while running.
    #[error("server failed: {0}")]
    Serve(std::io::Error),
}

/// The HTTP API channel (`http:<id>` sessions).
pub struct HttpChannel {
    settings: HttpSettings,
    state: Arc<GatewayState>,
    hub: Arc<HttpHub>,
    /// The socket bound at start, served by every run.
    listener: std::net::TcpListener,
}

impl HttpChannel {
    /// Binds `settings.listen` now, for a channel serving it with `state` behind `/status`
    /// and `/metrics`; a taken address is an error the gateway stops on (see the module docs).
    pub fn bind(settings: HttpSettings, state: Arc<GatewayState>) -> Result<Self, ServeError> {
        let listen = |error| ServeError::Listen {
            address: settings.listen,
            error,
        };
        let listener = std::net::TcpListener::bind(settings.listen).map_err(listen)?;
        listener.set_nonblocking(true).map_err(listen)?;
        Ok(Self {
            settings,
            state,
            hub: Arc::new(HttpHub::new()),
            listener,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

#[async_trait]
impl Channel for HttpChannel {
    fn name(&self) -> &str {
        "http"
    }

    async fn run(&self, context: ChannelContext) -> Result<(), ChannelError> {
        let serve_error = |error| ChannelError::new("http", ServeError::Serve(error));
        let listener = self
            .listener
            .try_clone()
            .and_then(tokio::net::TcpListener::from_std)
            .map_err(serve_error)?;
        let local = listener.local_addr().map_err(serve_error)?;
        tracing::info!(listen = %local, message_api = self.settings.token.is_some(), openai = self.settings.openai.is_some() && self.settings.token.is_some(), "HTTP API listening.");
        let app = AppState {
            dispatch: context.dispatch.clone(),
            state: self.state.clone(),
            hub: self.hub.clone(),
            token: self.settings.token.as_deref().map(Arc::from),
            shutdown: context.shutdown.clone(),
            tasks: context.tasks.clone(),
            liveness: context.liveness.clone(),
            approvals: self.settings.approvals.clone(),
            conversations: self.settings.conversations.clone(),
            openai: self.settings.openai.clone(),
        };
        context.ready.cancel();
        let shutdown = context.shutdown.clone();
        // `into_make_service`: every connection shares the router. Served as a plain `Router`,
        // axum clones it and rebuilds its route table for each connection, to turn handlers
        // into routes that `router` already turned (`with_state`): 5 % of a turn's
        // instructions for the one connection of an API call.
        axum::serve(listener, router(app).into_make_service())
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
            .map_err(serve_error)
    }

    /// The API is the owner's: whoever holds its token holds the owner's rights.
    async fn outbox(&self, session: &SessionId, _metadata: &Map<String, Value>) -> Option<Outbox> {
        Some(Outbox {
            sink: self.hub.outbox(session),
            readers: Readers::Owner,
        })
    }
}
