//! A fresh `$SQUIDBOT_HOME` per test and the binary run on it, as a user runs it.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::bin::squidbot;
use super::config::TestConfig;

/// A fresh `$SQUIDBOT_HOME` (also `HOME`) for one test.
pub struct Home {
    path: PathBuf,
    /// The directory removed on drop, unless the home belongs to someone else.
    _dir: Option<tempfile::TempDir>,
}

impl Home {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self {
            path: dir.path().to_owned(),
            _dir: Some(dir),
        }
    }

    /// The home at `path`, owned elsewhere (a running gateway's).
    pub fn at(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            _dir: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn config(&self) -> PathBuf {
        self.path().join("squidbot.yaml")
    }

    /// Writes the test config ([`TestConfig`]) with the LLM at `url` and a key, then `extra`.
    pub fn write_config(&self, url: &str, extra: &str) {
        TestConfig::new(url)
            .api_key("test-key")
            .extra(extra)
            .write(self.path());
    }

    /// Runs `squidbot onboard` for the scripted model at `url`, with `more` flags after;
    /// fails the test unless it succeeds.
    pub async fn onboard(&self, url: &str, more: &[&str]) {
        let mut args = vec!["onboard", "--api-base", url, "--model", "scripted-model"];
        args.extend_from_slice(more);
        let output = self.run(&args).await;
        assert!(
            output.status.success(),
            "squidbot {args:?}:\n{}{}",
            super::bin::stdout(&output),
            super::bin::stderr(&output)
        );
    }

    /// Runs the binary with this home and no inherited squidbot settings.
    pub async fn run(&self, args: &[&str]) -> Output {
        let mut command = squidbot(self.path());
        command
            .args(args)
            .env("SQUIDBOT_TEST_KEY", "test-key-from-env");
        command.output().await.unwrap()
    }
}
