//! [`HttpPlugin`]: the HTTP API as the rest of squidbot sees it (see
//! [`crate::channels::plugin`]): bound when built, so a taken address ends the gateway's start
//! with its reason; the listen address checked by `doctor`; its token as a secret.

use std::sync::Arc;

use async_trait::async_trait;

use super::openai::OpenAiEndpoint;
use super::{HttpChannel, HttpSettings};
use crate::channels::plugin::{
    ChannelPlugin, PROBE_TIMEOUT, Plugged, PluginContext, PluginError, Probe,
};
use crate::config::{Config, SecretField};

/// The HTTP API's plug-in.
pub struct HttpPlugin;

#[async_trait]
impl ChannelPlugin for HttpPlugin {
    fn name(&self) -> &'static str {
        "http"
    }

    fn enabled(&self, config: &Config) -> bool {
        config.gateway.http.enabled
    }

    fn build(&self, cx: &PluginContext<'_>) -> Result<Plugged, PluginError> {
        let http = &cx.config.gateway.http;
        let token = (!http.token.is_empty()).then(|| http.token.expose().to_owned());
        if token.is_none() {
            tracing::info!("No gateway.http.token configured; the /v1 message API is off.");
        }
        if http.openai && token.is_none() {
            tracing::warn!(
                "gateway.http.openai is on but no gateway.http.token is set; the OpenAI-compatible endpoint is off."
            );
        }
        let openai = (http.openai && token.is_some())
            .then(|| Arc::new(OpenAiEndpoint::open(cx.home, &cx.config.agents.workspace)));
        let settings = HttpSettings {
            listen: http.listen,
            token,
            approvals: cx.approvals.cloned(),
            conversations: cx.conversations.cloned(),
            openai,
        };
        if let Some(warning) = exposure(http.listen) {
            tracing::warn!(listen = %http.listen, "The HTTP API is {warning}.");
        }
        let channel = HttpChannel::bind(settings, cx.state.clone()).map_err(PluginError::new)?;
        Ok(Plugged::channel(Arc::new(channel)))
    }

    async fn doctor(&self, config: &Config) -> Vec<Probe> {
        vec![listen_check(config).await]
    }

    fn secrets<'a>(&self, config: &'a Config) -> Vec<SecretField<'a>> {
        let http = &config.gateway.http;
        vec![SecretField::new(
            "gateway.http.token".to_owned(),
            &http.token,
            &http.token_env,
        )]
    }
}

/// What to say of a listen address other machines can reach: the API is the owner's, guarded
/// by its token alone there (fine in a container behind a published loopback port).
pub fn exposure(addr: std::net::SocketAddr) -> Option<&'static str> {
    (!addr.ip().is_loopback()).then_some(
        "reachable from other machines, guarded by the token alone; use 127.0.0.1 \
         unless a container or proxy needs it",
    )
}

/// The gateway's listen address: free, or already a squidbot gateway answering `/healthz`.
async fn listen_check(config: &Config) -> Probe {
    let addr = config.gateway.http.listen;
    let what = match exposure(addr) {
        Some(warning) => format!("http listen {addr} (warning: {warning})"),
        None => format!("http listen {addr}"),
    };
    match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => {
            drop(listener);
            Probe::ok(format!("{what} (free)"))
        }
        Err(bind_error) => {
            let url = format!("http://{addr}/healthz");
            let client = reqwest::Client::builder().timeout(PROBE_TIMEOUT).build();
            let healthy = match client {
                Ok(client) => match client.get(&url).send().await {
                    Ok(response) => response.status().is_success(),
                    Err(_) => false,
                },
                Err(_) => false,
            };
            if healthy {
                Probe::ok(format!("{what} (a gateway is already running there)"))
            } else {
                Probe::fail(
                    what,
                    format!(
                        "cannot bind: {bind_error} (stop what uses it, or change gateway.http.listen)"
                    ),
                )
            }
        }
    }
}
