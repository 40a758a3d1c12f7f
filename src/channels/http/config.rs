//! `gateway.http`: the HTTP server's settings.
//!
//! The doc comments on the fields are the reference for these settings. The section stays
//! under `gateway`, where the original has it; only its type lives here.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use serde::Deserialize;

use crate::config::check::{ChannelSettings, Checker};
use crate::config::secret::{EnvLookup, Secret};

/// `gateway.http`: the HTTP server.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Whether the server runs. Default: `true`.
    pub enabled: bool,
    /// Address and port to listen on. Default: `127.0.0.1:8765` (loopback only).
    pub listen: SocketAddr,
    /// Bearer token of the message API, or `${VAR}`; empty disables the message API (health,
    /// status and metrics stay up). Default: empty.
    pub token: Secret,
    /// Name of an environment variable holding the token. Default: empty.
    pub token_env: String,
    /// Whether the OpenAI-compatible endpoint (`/v1/chat/completions`, `/v1/models`) is
    /// served, behind the same token, so apps that speak to OpenAI are front ends of
    /// squidbot. Default: `false`.
    pub openai: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8765)),
            token: Secret::default(),
            token_env: String::new(),
            openai: false,
        }
    }
}

impl ChannelSettings for HttpConfig {
    fn resolve_secrets(&mut self, checker: &mut Checker<'_>, env: EnvLookup<'_>) {
        if self.enabled {
            let field = "gateway.http.token";
            checker.gateway_secret(&mut self.token, &self.token_env, field, env);
        }
    }
}
