//! The configuration a test writes, built in one place: one provider (`local`) at the scripted
//! LLM's URL, one model (`small`) in the default pool and no retries, plus what the test asks
//! for. The suites used to copy this YAML by hand (issue #37 counted 15 copies), so a change to
//! the schema meant 15 edits and a forgotten one failed far from its cause.

use std::path::Path;

use super::daemon::TOKEN;

/// A test's `squidbot.yaml`, built up and then written or read as text.
#[derive(Clone, Debug)]
pub struct TestConfig {
    url: String,
    provider: Vec<String>,
    providers: String,
    model: String,
    model_lines: Vec<String>,
    models: String,
    pools: String,
    agents: Vec<String>,
    gateway: Vec<String>,
    http: Vec<String>,
    extra: String,
}

impl TestConfig {
    /// The LLM at `url` (the scripted LLM's `url()`): provider `local`, model `small` naming
    /// `scripted-model`, pool `default: [small]`, `max_retries: 0`.
    pub fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            provider: Vec::new(),
            providers: String::new(),
            model: "scripted-model".to_owned(),
            model_lines: Vec::new(),
            models: String::new(),
            pools: String::new(),
            agents: Vec::new(),
            gateway: Vec::new(),
            http: Vec::new(),
            extra: String::new(),
        }
    }

    /// The provider's key, written into the file.
    pub fn api_key(self, key: &str) -> Self {
        self.provider_line(&format!("api_key: {key}"))
    }

    /// One more `key: value` line of the provider (`api: responses`, `api_key_env: X`).
    pub fn provider_line(mut self, line: &str) -> Self {
        self.provider.push(line.to_owned());
        self
    }

    /// One more provider, `name` at `api_base` (a transcription server, a second LLM). Only
    /// the server suites use it so far.
    #[allow(dead_code)]
    pub fn more_provider(mut self, name: &str, api_base: &str) -> Self {
        self.providers
            .push_str(&format!("    {name}:\n      api_base: \"{api_base}\"\n"));
        self
    }

    /// The model name `small` sends (quoted, so any name fits).
    pub fn model(mut self, model: &str) -> Self {
        self.model = format!("\"{model}\"");
        self
    }

    /// One more `key: value` line of model `small` (`price: {...}`, `vision: true`).
    pub fn model_line(mut self, line: &str) -> Self {
        self.model_lines.push(line.to_owned());
        self
    }

    /// More models of provider `local` beside `small`, each `name: model`.
    pub fn more_model(mut self, name: &str, model: &str) -> Self {
        self.models.push_str(&format!(
            "    {name}:\n      provider: local\n      model: {model}\n"
        ));
        self
    }

    /// More pools beside `default`, each `name: [models]` as YAML.
    pub fn pool(mut self, name: &str, models: &str) -> Self {
        self.pools.push_str(&format!("    {name}: {models}\n"));
        self
    }

    /// No heartbeat (a gateway's would otherwise call the LLM on its own schedule).
    pub fn no_heartbeat(self) -> Self {
        self.agents_line("heartbeat:\n    enabled: false")
    }

    /// One more `key: value` line of the `agents` section (`restrict_to_workspace: true`).
    pub fn agents_line(mut self, line: &str) -> Self {
        self.agents.push(line.to_owned());
        self
    }

    /// The HTTP channel listening on `address`, answering requests with `token` (`None`: no
    /// message API).
    pub fn http(mut self, address: &str, token: Option<&str>) -> Self {
        self.http.push(format!("listen: \"{address}\""));
        if let Some(token) = token {
            self.http.push(format!("token: {token}"));
        }
        self
    }

    /// The HTTP channel on loopback `port`, answering requests with the test token
    /// ([`TOKEN`]), and no heartbeat: how the suites start a gateway.
    pub fn gateway_on(self, port: u16) -> Self {
        self.no_heartbeat()
            .http(&format!("127.0.0.1:{port}"), Some(TOKEN))
    }

    /// One more `key: value` line of the `gateway` section (`shutdown_grace_seconds: 5`).
    pub fn gateway_line(mut self, line: &str) -> Self {
        self.gateway.push(line.to_owned());
        self
    }

    /// YAML appended as it is: top-level sections the builder does not know (`channels`,
    /// `owner`, `tools`).
    pub fn extra(mut self, yaml: &str) -> Self {
        self.extra.push_str(yaml);
        if !self.extra.is_empty() && !self.extra.ends_with('\n') {
            self.extra.push('\n');
        }
        self
    }

    /// The whole file.
    pub fn yaml(&self) -> String {
        let mut out = format!(
            "llm:\n  default_pool: default\n  providers:\n    local:\n      api_base: \"{}\"\n",
            self.url
        );
        for line in &self.provider {
            out.push_str(&format!("      {line}\n"));
        }
        out.push_str(&self.providers);
        out.push_str(&format!(
            "  models:\n    small:\n      provider: local\n      model: {}\n",
            self.model
        ));
        for line in &self.model_lines {
            out.push_str(&format!("      {line}\n"));
        }
        out.push_str(&self.models);
        out.push_str("  pools:\n    default: [small]\n");
        out.push_str(&self.pools);
        out.push_str("  retry:\n    max_retries: 0\n");
        if !self.agents.is_empty() {
            out.push_str("agents:\n");
            for line in &self.agents {
                out.push_str(&format!("  {line}\n"));
            }
        }
        if !self.gateway.is_empty() || !self.http.is_empty() {
            out.push_str("gateway:\n");
            for line in &self.gateway {
                out.push_str(&format!("  {line}\n"));
            }
            if !self.http.is_empty() {
                out.push_str("  http:\n");
                for line in &self.http {
                    out.push_str(&format!("    {line}\n"));
                }
            }
        }
        out.push_str(&self.extra);
        out
    }

    /// Writes the file as `home/squidbot.yaml`.
    pub fn write(&self, home: &Path) {
        std::fs::write(home.join("squidbot.yaml"), self.yaml()).unwrap();
    }
}
