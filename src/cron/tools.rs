//! The cron tools: `cron_list`, `cron_remove`, `cron_set_enabled` (registered once, holding the
//! job store) and `cron_add` (built per turn with that turn's session and routing metadata, so
//! a job made in a Matrix room replies in that room).
//!
//! They share `cron/jobs.json` with the scheduler and `squidbot cron` through locked updates
//! (see `cron::store`), so nothing they change is lost. `cron_add` is offered only in turns a
//! person started (`Origin::may_schedule`).

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::admin::{self, JobRoutes, target_metadata};
use super::store::{CronJobs, NewJob};
use super::{CronError, format_jobs};
use crate::core::authority::{Effect, Effects};
use crate::core::ports::clock::Clock;
use crate::core::ports::tool::{Tool, ToolContext, ToolOutput, TypedSpec, TypedTool};
use crate::core::session::SessionId;

/// The registry tools (`cron_list`, `cron_remove`, `cron_set_enabled`) over `store`.
pub fn registry_tools(store: &CronJobs, clock: &Arc<dyn Clock>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(CronListTool::new(store.clone(), clock.clone())),
        Arc::new(CronRemoveTool::new(store.clone())),
        Arc::new(CronSetEnabledTool::new(store.clone(), clock.clone())),
    ]
}

fn now(clock: &Arc<dyn Clock>) -> chrono::DateTime<chrono::Utc> {
    clock.now().with_timezone(&chrono::Utc)
}

fn failure(tool: &str, error: &CronError) -> ToolOutput {
    if matches!(error, CronError::Store(_)) {
        tracing::error!(tool, error = %error, "Cron tool could not use the job store.");
    }
    ToolOutput::error(format!("Error: {error}"))
}

/// `cron_list`: the jobs with their schedules, next runs and errors.
pub struct CronListTool {
    store: CronJobs,
    clock: Arc<dyn Clock>,
    spec: TypedSpec<NoArguments>,
}

/// `cron_list` takes no arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArguments {}

impl CronListTool {
    /// The tool over `store`.
    pub fn new(store: CronJobs, clock: Arc<dyn Clock>) -> Self {
        let spec = TypedSpec::new("cron_list", "List scheduled cron jobs.");
        Self { store, clock, spec }
    }
}

#[async_trait]
impl TypedTool for CronListTool {
    type Arguments = NoArguments;

    fn definition(&self) -> &TypedSpec<NoArguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::Schedules])
    }

    async fn run(&self, _arguments: NoArguments, _context: &ToolContext) -> ToolOutput {
        match self.store.load().await {
            Ok(jobs) => ToolOutput::ok(format_jobs(&jobs, now(&self.clock))),
            Err(error) => failure("cron_list", &CronError::Store(error)),
        }
    }
}

/// `cron_remove`: deletes a job.
pub struct CronRemoveTool {
    store: CronJobs,
    spec: TypedSpec<RemoveArguments>,
}

/// The arguments of `cron_remove`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoveArguments {
    /// The job id (from cron_list).
    job_id: String,
}

impl CronRemoveTool {
    /// The tool over `store`.
    pub fn new(store: CronJobs) -> Self {
        let spec = TypedSpec::new("cron_remove", "Remove a cron job by id.");
        Self { store, spec }
    }
}

#[async_trait]
impl TypedTool for CronRemoveTool {
    type Arguments = RemoveArguments;

    fn definition(&self) -> &TypedSpec<RemoveArguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::Schedules])
    }

    async fn run(&self, arguments: RemoveArguments, _context: &ToolContext) -> ToolOutput {
        match admin::remove_job(&self.store, arguments.job_id.trim()).await {
            Ok(job) => ToolOutput::ok(format!("OK: removed cron job id={}", job.id)),
            Err(error) => failure("cron_remove", &error),
        }
    }
}

/// `cron_set_enabled`: pauses or resumes a job.
pub struct CronSetEnabledTool {
    store: CronJobs,
    clock: Arc<dyn Clock>,
    spec: TypedSpec<SetEnabledArguments>,
}

/// The arguments of `cron_set_enabled`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetEnabledArguments {
    /// The job id (from cron_list).
    job_id: String,
    enabled: bool,
}

impl CronSetEnabledTool {
    /// The tool over `store`.
    pub fn new(store: CronJobs, clock: Arc<dyn Clock>) -> Self {
        let spec = TypedSpec::new("cron_set_enabled", "Enable or disable a cron job by id.");
        Self { store, clock, spec }
    }
}

#[async_trait]
impl TypedTool for CronSetEnabledTool {
    type Arguments = SetEnabledArguments;

    fn definition(&self) -> &TypedSpec<SetEnabledArguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::Schedules])
    }

    async fn run(&self, arguments: SetEnabledArguments, _context: &ToolContext) -> ToolOutput {
        let id = arguments.job_id.trim();
        match admin::set_enabled(&self.store, id, arguments.enabled, now(&self.clock)).await {
            Ok(job) => {
                let state = if job.enabled { "enabled" } else { "disabled" };
                ToolOutput::ok(format!("OK: {state} cron job id={}", job.id))
            }
            Err(error) => failure("cron_set_enabled", &error),
        }
    }
}

/// `cron_add`: schedules a prompt; one instance per turn, targeting that turn's session unless
/// told otherwise.
pub struct CronAddTool {
    store: CronJobs,
    /// How each channel routes a job aimed at one of its sessions.
    routes: Arc<dyn JobRoutes>,
    clock: Arc<dyn Clock>,
    session: SessionId,
    metadata: Map<String, Value>,
    /// The sender id of the person whose turn this is: recorded as the job's creator.
    creator: String,
}

/// The arguments of `cron_add`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddArguments {
    /// Short job name.
    name: String,
    /// The prompt you get when it fires.
    message: String,
    schedule: String,
    /// IANA zone of a cron schedule (default: the host's).
    timezone: Option<String>,
    /// Target session id (default: this session).
    channel: Option<String>,
    enabled: Option<bool>,
}

/// Built once: the tool itself is built for every turn.
static ADD_SPEC: LazyLock<TypedSpec<AddArguments>> = LazyLock::new(|| {
    TypedSpec::new(
        "cron_add",
        "Schedule a prompt for yourself; your reply goes to the target session. Schedule: \
         cron ('0 9 * * 1-5'), 'every N' (seconds) or 'at 2026-05-01T09:00:00+02:00'.",
    )
});

impl CronAddTool {
    /// The tool for one turn of `session` with the channel's routing `metadata`, asked for
    /// by `creator` (a sender id); `routes` fill in what the target's channel needs.
    pub fn new(
        store: CronJobs,
        routes: Arc<dyn JobRoutes>,
        clock: Arc<dyn Clock>,
        session: SessionId,
        metadata: Map<String, Value>,
        creator: impl Into<String>,
    ) -> Self {
        Self {
            store,
            routes,
            clock,
            session,
            metadata,
            creator: creator.into(),
        }
    }

    async fn add(&self, arguments: AddArguments) -> Result<String, CronError> {
        let target = match arguments.channel.as_deref().map(str::trim) {
            Some(channel) if !channel.is_empty() => {
                SessionId::parse(channel).map_err(|error| CronError::InvalidTarget {
                    target: channel.to_owned(),
                    reason: error.to_string(),
                })?
            }
            _ if self.session.channel() == "cli" => {
                return Err(CronError::InvalidTarget {
                    target: self.session.to_string(),
                    reason: "from the terminal, give 'channel' (e.g. matrix:!room:server or email:you@example.org)".into(),
                });
            }
            _ => self.session.clone(),
        };
        let name = arguments.name.trim().to_owned();
        let current = Some((&self.session, &self.metadata));
        let metadata = target_metadata(self.routes.as_ref(), &target, &name, current)?;
        let new = NewJob {
            name,
            message: arguments.message,
            schedule: arguments.schedule.trim().to_owned(),
            channel: target.to_string(),
            timezone: arguments.timezone.unwrap_or_else(|| "local".to_owned()),
            metadata,
            created_by: Some(self.creator.clone()),
            created_in: Some(self.session.to_string()),
        };
        let now = now(&self.clock);
        let job = admin::add_job(&self.store, new, now).await?;
        if arguments.enabled == Some(false) {
            admin::set_enabled(&self.store, &job.id, false, now).await?;
            return Ok(format!("OK: created cron job id={} (disabled)", job.id));
        }
        let next = crate::cron::scheduler::next_run(&job, now)
            .map(|next| format!(", next run {}", next.to_rfc3339()))
            .unwrap_or_default();
        Ok(format!("OK: created cron job id={}{next}", job.id))
    }
}

#[async_trait]
impl TypedTool for CronAddTool {
    type Arguments = AddArguments;

    fn definition(&self) -> &TypedSpec<AddArguments> {
        &ADD_SPEC
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::Schedules])
    }

    async fn run(&self, arguments: AddArguments, _context: &ToolContext) -> ToolOutput {
        if arguments.name.trim().is_empty() || arguments.message.trim().is_empty() {
            return ToolOutput::error("Error: 'name' and 'message' must not be empty.");
        }
        match self.add(arguments).await {
            Ok(text) => ToolOutput::ok(text),
            Err(error) => failure("cron_add", &error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, FixedOffset, Utc};
    use serde_json::json;

    struct FixedClock(DateTime<FixedOffset>);

    impl Clock for FixedClock {
        fn now(&self) -> DateTime<FixedOffset> {
            self.0
        }
    }

    fn setup() -> (tempfile::TempDir, CronJobs, Arc<dyn Clock>) {
        let home = tempfile::tempdir().unwrap();
        let store = CronJobs::new(home.path());
        let clock: Arc<dyn Clock> = Arc::new(FixedClock(
            DateTime::parse_from_rfc3339("2026-03-01T10:00:00+01:00").unwrap(),
        ));
        (home, store, clock)
    }

    fn context(session: &SessionId) -> ToolContext {
        ToolContext::for_test().with_session(session.clone())
    }

    /// `cron_add` for a turn of `session` without routing metadata, asked by `me@example.org`.
    fn add_tool(store: &CronJobs, clock: Arc<dyn Clock>, session: &SessionId) -> CronAddTool {
        CronAddTool::new(
            store.clone(),
            Arc::new(crate::channels::Routes::new()),
            clock,
            session.clone(),
            Map::new(),
            "me@example.org",
        )
    }

    #[tokio::test]
    async fn add_defaults_to_the_current_matrix_room_with_its_thread() {
        let (_home, store, clock) = setup();
        let session = SessionId::parse("matrix:!room:example.org").unwrap();
        let metadata = json!({"matrix_room_id": "!room:example.org", "matrix_thread_root": "$t"});
        let metadata = metadata.as_object().unwrap().clone();
        let tool = CronAddTool::new(
            store.clone(),
            Arc::new(crate::channels::Routes::new()),
            clock,
            session.clone(),
            metadata,
            "@alex:example.org",
        );
        let arguments = json!({"name": "tea", "message": "Remind me of tea", "schedule": "0 16 * * *", "timezone": "Europe/Berlin"});
        let output = tool.call(arguments, &context(&session)).await;
        assert!(!output.is_error, "{}", output.content);
        assert!(output.content.starts_with("OK: created cron job id="));
        let jobs = store.load().await.unwrap();
        assert_eq!(jobs[0].channel, "matrix:!room:example.org");
        assert_eq!(jobs[0].metadata["matrix_room_id"], "!room:example.org");
        assert_eq!(jobs[0].metadata["matrix_thread_root"], "$t");
        assert_eq!(jobs[0].timezone, "Europe/Berlin");
        assert_eq!(jobs[0].created_by.as_deref(), Some("@alex:example.org"));
        assert_eq!(
            jobs[0].created_in.as_deref(),
            Some("matrix:!room:example.org")
        );
        let listed = crate::cron::format_jobs(&jobs, Utc::now());
        assert!(
            listed.contains("created by @alex:example.org in matrix:!room:example.org"),
            "{listed}"
        );
    }

    #[tokio::test]
    async fn add_from_the_terminal_needs_an_explicit_target() {
        let (_home, store, clock) = setup();
        let session = SessionId::cli_local();
        let tool = add_tool(&store, clock, &session);
        let base = json!({"name": "n", "message": "m", "schedule": "every 60"});
        let output = tool.call(base.clone(), &context(&session)).await;
        assert!(
            output.is_error && output.content.contains("channel"),
            "{}",
            output.content
        );
        let mut explicit = base;
        explicit["channel"] = json!("email:me@example.org");
        let output = tool.call(explicit, &context(&session)).await;
        assert!(!output.is_error, "{}", output.content);
        let jobs = store.load().await.unwrap();
        assert_eq!(jobs[0].metadata["email_subject"], "[squidbot] n");
    }

    #[tokio::test]
    async fn add_rejects_bad_input_with_clear_errors() {
        let (_home, store, clock) = setup();
        let session = SessionId::parse("email:me@example.org").unwrap();
        let tool = add_tool(&store, clock, &session);
        for (arguments, needle) in [
            (
                json!({"name": "n", "message": "m", "schedule": "every 0"}),
                "invalid schedule",
            ),
            (
                json!({"name": "n", "message": "m", "schedule": "0 9 * * *", "timezone": "Mars/Base"}),
                "unknown timezone",
            ),
            (
                json!({"name": "n", "message": "m", "schedule": "at 2020-01-01T00:00:00Z"}),
                "already passed",
            ),
            (
                json!({"name": "n", "message": "m", "schedule": "every 5", "when": 1}),
                "unknown field",
            ),
            (json!({"name": "n", "schedule": "every 5"}), "missing field"),
            (
                json!({"name": "n", "message": "m", "schedule": "every 5", "channel": "matrix:@bob:x"}),
                "room",
            ),
        ] {
            let output = tool.call(arguments, &context(&session)).await;
            assert!(output.is_error, "{}", output.content);
            assert!(
                output.content.contains(needle),
                "{} lacks {needle}",
                output.content
            );
        }
        assert!(store.load().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn list_toggle_and_remove() {
        let (_home, store, clock) = setup();
        let session = SessionId::parse("email:me@example.org").unwrap();
        let add = add_tool(&store, clock.clone(), &session);
        let tools = registry_tools(&store, &clock);
        let ctx = context(&session);
        let output = tools[0].call(Value::Null, &ctx).await;
        assert_eq!(output.content, "No cron jobs configured.");
        add.call(
            json!({"name": "n", "message": "m", "schedule": "every 60"}),
            &ctx,
        )
        .await;
        let id = store.load().await.unwrap()[0].id.clone();
        let output = tools[0].call(json!({}), &ctx).await;
        assert!(
            output.content.contains(&format!("[on] {id}  n")),
            "{}",
            output.content
        );
        let output = tools[2]
            .call(json!({"job_id": id, "enabled": false}), &ctx)
            .await;
        assert_eq!(output.content, format!("OK: disabled cron job id={id}"));
        assert!(!store.load().await.unwrap()[0].enabled);
        let output = tools[1].call(json!({"job_id": "nope"}), &ctx).await;
        assert!(output.is_error && output.content.contains("nope"));
        let output = tools[1].call(json!({"job_id": id}), &ctx).await;
        assert_eq!(output.content, format!("OK: removed cron job id={id}"));
        assert!(store.load().await.unwrap().is_empty());
    }
}
