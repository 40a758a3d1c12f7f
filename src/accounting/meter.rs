//! [`UsageMeter`]: the running totals of tokens and cost, the prices, and the budgets checked
//! before each LLM call; [`crate::accounting::layer::AccountedLlm`] is the client layer through
//! which every call is admitted and recorded.
//!
//! The totals are folded from the ledger, never kept apart from it: a call's record is
//! appended, and the next poll (before the next call, or for `/status`) reads it back together
//! with whatever another process (`squidbot agent` beside the gateway) appended. So the budgets
//! hold across processes and restarts, and the hot path costs one poll of a file that grew by a
//! line. A record that cannot be appended (disk full) is folded in directly, so this process
//! still counts it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Datelike, NaiveDate, Utc};
use serde::Serialize;

use crate::accounting::budget::{self, BudgetKind, Budgets, Spent};
use crate::accounting::ledger::{UsageLedger, UsageRecord};
use crate::accounting::price::{Price, Totals};
use crate::core::ports::clock::Clock;
use crate::core::ports::llm::{ChatRequest, ChatResponse, LlmError};
use crate::core::ports::usage::{CallTag, Purpose, SpendReport, TokenUsage};
use crate::core::session::SessionId;
use crate::core::window::approx_tokens;
use crate::zone::Zone;

/// What one picture costs a model that reads it, roughly: OpenAI counts 765 tokens for a
/// 1024×1024 image at high detail, Anthropic about 1 600 for 1.15 megapixels, Gemini 258; a
/// middle figure, used only where the provider reported no usage. (A model that gets the path
/// instead is overcharged by it, which errs on the side of the budget.)
const IMAGE_TOKENS: usize = 800;

/// Days of daily totals kept in memory (the budgets need today; `/status` this month).
const KEPT_DAYS: usize = 62;

/// What the meter needs to know from the configuration.
#[derive(Clone, Debug)]
pub struct MeterSettings {
    /// The limits.
    pub budgets: Budgets,
    /// Prices by configured model name; a model without one costs nothing.
    pub prices: HashMap<String, Price>,
    /// The owner's zone, in which days begin.
    pub zone: Zone,
}

/// Heartbeat ticks or cron runs a budget skipped.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Skips {
    /// How many since start.
    pub count: u64,
    /// The budget of the last one.
    pub last_budget: &'static str,
    /// When the last one was.
    pub last_at: Option<DateTime<Utc>>,
}

/// One budget as `/status` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct BudgetReport {
    /// Its limit.
    pub limit: f64,
    /// Spent today (daily budgets only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_today: Option<f64>,
    /// Whether today's spend reached it (daily budgets only).
    pub reached: bool,
}

/// The usage part of `/status`.
#[derive(Clone, Debug, Serialize)]
pub struct UsageStatus {
    /// The zone the days are counted in.
    pub timezone: String,
    /// Today's totals.
    pub today: Totals,
    /// This month's totals (from the 1st, in the same zone).
    pub month: Totals,
    /// When the daily budgets reset.
    pub resets_at: DateTime<Utc>,
    /// The configured budgets by field name.
    pub budgets: BTreeMap<&'static str, BudgetReport>,
    /// Heartbeat ticks and cron runs skipped for a budget, by purpose.
    pub skipped: BTreeMap<&'static str, Skips>,
}

/// The mutable part of the meter.
#[derive(Default)]
struct Folded {
    days: BTreeMap<NaiveDate, Totals>,
    /// Per session, the records polled (this month and the previous one), for `/usage`.
    sessions: HashMap<String, Totals>,
    notified: HashSet<(BudgetKind, NaiveDate)>,
    skipped: BTreeMap<&'static str, Skips>,
}

/// Running totals, budgets and the ledger behind them; one per process, shared by every
/// [`AccountedLlm`](crate::accounting::layer::AccountedLlm).
pub struct UsageMeter {
    ledger: Arc<dyn UsageLedger>,
    settings: MeterSettings,
    clock: Arc<dyn Clock>,
    /// A std lock: held only to fold records or read totals, never across an await.
    folded: Mutex<Folded>,
    /// Appends started where nothing can await them (a call cut short is recorded from a
    /// `Drop`), which [`UsageMeter::flush`] waits for before the process exits.
    pending: tokio_util::task::TaskTracker,
}

impl std::fmt::Debug for UsageMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsageMeter")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl UsageMeter {
    /// A meter over `ledger`.
    pub fn new(
        ledger: Arc<dyn UsageLedger>,
        settings: MeterSettings,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            ledger,
            settings,
            clock,
            folded: Mutex::default(),
            pending: tokio_util::task::TaskTracker::new(),
        }
    }

    fn folded(&self) -> std::sync::MutexGuard<'_, Folded> {
        self.folded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads what was appended to the ledger since the last refresh into the totals.
    pub async fn refresh(&self) {
        match self.ledger.poll().await {
            Ok(records) if records.is_empty() => {}
            Ok(records) => {
                let mut folded = self.folded();
                for record in &records {
                    self.fold(&mut folded, record);
                }
            }
            Err(error) => {
                tracing::warn!(error = %error, "Usage ledger unreadable; budgets use the totals known so far.");
            }
        }
    }

    fn fold(&self, folded: &mut Folded, record: &UsageRecord) {
        let day = budget::local_date(&self.settings.zone, record.time);
        folded.days.entry(day).or_default().add(record);
        if let Some(session) = &record.session {
            folded
                .sessions
                .entry(session.clone())
                .or_default()
                .add(record);
        }
        while folded.days.len() > KEPT_DAYS {
            folded.days.pop_first();
        }
    }

    /// Whether a call tagged `call` may be made now (after a refresh).
    pub async fn admit(&self, call: CallTag<'_>) -> Result<(), LlmError> {
        self.refresh().await;
        let now = self.clock.now().to_utc();
        let zone = &self.settings.zone;
        let today = budget::local_date(zone, now);
        let scheduled = call.purpose.is_scheduled();
        let (exceeded, told) = {
            let mut folded = self.folded();
            let totals = folded.days.get(&today).copied().unwrap_or_default();
            let spent = Spent {
                today_tokens: totals.tokens(),
                today_cost: totals.cost,
                turn_tokens: call.turn.map_or(0, |turn| turn.tokens()),
            };
            let Some(exceeded) = self.settings.budgets.exceeded(call.purpose, spent) else {
                return Ok(());
            };
            if scheduled {
                let skips = folded.skipped.entry(call.purpose.as_str()).or_default();
                skips.count += 1;
                skips.last_budget = exceeded.kind.field();
                skips.last_at = Some(now);
            }
            let told = folded.notified.contains(&(exceeded.kind, today));
            (exceeded, told)
        };
        let budget = exceeded.kind.field();
        let notify = if !scheduled {
            true
        } else if told {
            false
        } else {
            let first = self
                .ledger
                .first_notice(budget, today)
                .await
                .unwrap_or_else(|error| {
                    tracing::warn!(error = %error, "Budget notices unreadable; telling the owner.");
                    true
                });
            self.folded().notified.insert((exceeded.kind, today));
            first
        };
        tracing::info!(
            purpose = call.purpose.as_str(),
            budget,
            notify,
            "Budget reached; LLM call not made."
        );
        Err(LlmError::Budget {
            stop: budget::with_reset(exceeded, zone, now),
            notify,
        })
    }

    /// Records an answered call of `pool` (a configured name): its tokens (reported, or
    /// estimated from `request` and the answer), its cost, the turn's spend; appends it to the
    /// ledger and returns it.
    pub async fn record(
        &self,
        pool: &str,
        request: &ChatRequest<'_>,
        response: &ChatResponse,
    ) -> UsageRecord {
        let (usage, estimated) = match response.usage {
            Some(usage) => (usage, false),
            None => (estimate(request, response), true),
        };
        let record = self.usage_record(pool, request.call, &response.model, usage, estimated);
        self.append(&record).await;
        record
    }

    /// The record of a call of `pool` tagged `call`, answered by `model` with `usage`, added
    /// to its turn's spend.
    pub(crate) fn usage_record(
        &self,
        pool: &str,
        call: CallTag<'_>,
        model: &str,
        usage: TokenUsage,
        estimated: bool,
    ) -> UsageRecord {
        let cost = self
            .settings
            .prices
            .get(model)
            .map_or(0.0, |price| price.cost(&usage));
        if let Some(turn) = call.turn {
            turn.add(usage.total());
        }
        UsageRecord {
            time: self.clock.now().to_utc(),
            session: call.session.map(ToString::to_string),
            purpose: call.purpose,
            pool: pool.to_owned(),
            model: model.to_owned(),
            prompt_tokens: usage.prompt,
            completion_tokens: usage.completion,
            cached_tokens: usage.cached,
            cache_written_tokens: usage.cache_written,
            cost,
            estimated,
            audio_seconds: 0.0,
        }
    }

    /// Records `seconds` of audio transcribed by `model` for `session`, costing `cost`: a
    /// line of its own in the ledger, which the cost budgets and `squidbot usage` count.
    pub async fn record_audio(
        &self,
        session: Option<&str>,
        model: &str,
        seconds: f64,
        cost: f64,
    ) -> UsageRecord {
        let record = UsageRecord {
            time: self.clock.now().to_utc(),
            session: session.map(str::to_owned),
            purpose: Purpose::Transcription,
            pool: "transcription".to_owned(),
            model: model.to_owned(),
            prompt_tokens: 0,
            completion_tokens: 0,
            cached_tokens: 0,
            cache_written_tokens: 0,
            cost,
            estimated: false,
            audio_seconds: seconds,
        };
        self.append(&record).await;
        record
    }

    /// Writes `record` to the ledger (or, failing that, counts it in memory).
    pub(crate) async fn append(&self, record: &UsageRecord) {
        if let Err(error) = self.ledger.append(record).await {
            tracing::warn!(error = %error, "Usage record not written; counted in memory only.");
            let mut folded = self.folded();
            self.fold(&mut folded, record);
        }
    }

    /// Appends `record` in the background on `runtime`, then hands it to `then`: for a
    /// caller that cannot await (a `Drop`). [`UsageMeter::flush`] waits for it.
    pub(crate) fn append_later(
        self: &Arc<Self>,
        runtime: &tokio::runtime::Handle,
        record: UsageRecord,
        then: impl FnOnce(&UsageRecord) + Send + 'static,
    ) {
        let meter = Arc::clone(self);
        let task = async move {
            meter.append(&record).await;
            then(&record);
        };
        self.pending.spawn_on(task, runtime);
    }

    /// Waits up to `limit` for the appends [`UsageMeter::append_later`] started: the gateway
    /// calls it last, so calls its stop cut short are in the ledger (and the budgets) when
    /// the process is gone. Whether all were written in time.
    pub async fn flush(&self, limit: std::time::Duration) -> bool {
        self.pending.close();
        let done = tokio::time::timeout(limit, self.pending.wait())
            .await
            .is_ok();
        self.pending.reopen();
        done
    }

    /// Today's and this month's totals, the budgets and the skips, after a refresh.
    pub async fn status(&self) -> UsageStatus {
        self.refresh().await;
        let now = self.clock.now().to_utc();
        let zone = &self.settings.zone;
        let today = budget::local_date(zone, now);
        let folded = self.folded();
        let today_totals = folded.days.get(&today).copied().unwrap_or_default();
        let mut month = Totals::default();
        for (_, totals) in folded
            .days
            .range(today.with_day(1).unwrap_or(today)..=today)
        {
            month.merge(totals);
        }
        let b = &self.settings.budgets;
        let mut budgets = BTreeMap::new();
        let mut daily = |kind: BudgetKind, limit: Option<f64>, used: f64| {
            if let Some(limit) = limit {
                let report = BudgetReport {
                    limit,
                    used_today: Some(used),
                    reached: used >= limit,
                };
                budgets.insert(kind.field(), report);
            }
        };
        daily(
            BudgetKind::DailyTokens,
            b.daily_tokens.map(|n| n as f64),
            today_totals.tokens() as f64,
        );
        daily(BudgetKind::DailyCost, b.daily_cost, today_totals.cost);
        for (kind, limit) in [
            (BudgetKind::TurnTokens, b.turn_tokens),
            (BudgetKind::HeartbeatTokens, b.heartbeat_tokens),
            (BudgetKind::CronTokens, b.cron_tokens),
        ] {
            if let Some(limit) = limit {
                let report = BudgetReport {
                    limit: limit as f64,
                    used_today: None,
                    reached: false,
                };
                budgets.insert(kind.field(), report);
            }
        }
        UsageStatus {
            timezone: zone.to_string(),
            today: today_totals,
            month,
            resets_at: budget::next_midnight(zone, now),
            budgets,
            skipped: folded.skipped.clone(),
        }
    }

    /// The chat `/status` part: today's and this month's tokens and cost, and a reached daily
    /// budget.
    async fn line(&self) -> String {
        let status = self.status().await;
        let reached: Vec<&str> = status
            .budgets
            .iter()
            .filter(|(_, report)| report.reached)
            .map(|(name, _)| *name)
            .collect();
        let mut line = format!(
            "usage today: {} tokens, cost {:.4} · this month: {} tokens, cost {:.4}",
            status.today.tokens(),
            status.today.cost,
            status.month.tokens(),
            status.month.cost
        );
        let today = &status.today;
        if today.cached_tokens > 0 || today.cache_written_tokens > 0 {
            line.push_str(&format!(
                " · cache today: {} read, {} written, {:.0} % hit",
                today.cached_tokens,
                today.cache_written_tokens,
                today.cache_hit_rate * 100.0
            ));
        }
        if !reached.is_empty() {
            line.push_str(" · budget reached: ");
            line.push_str(&reached.join(", "));
        }
        line
    }
}

/// The tokens of a call whose provider reported none: about four characters a token over the

#[async_trait::async_trait]
impl SpendReport for UsageMeter {
    async fn status_line(&self) -> String {
        self.line().await
    }

    async fn usage_lines(&self, session: &SessionId) -> String {
        let today = self.status().await.today;
        let conversation = self
            .folded()
            .sessions
            .get(session.as_str())
            .copied()
            .unwrap_or_default();
        format!(
            "this conversation (this month and the last): {}\ntoday, all conversations: {}",
            usage_figures(&conversation),
            usage_figures(&today)
        )
    }
}

/// One `/usage` line: tokens, cache reads, writes and hit rate, cost, and how many calls were
/// estimated.
fn usage_figures(totals: &Totals) -> String {
    let mut line = format!(
        "{} calls, {} prompt tokens ({} cached, {} written to the cache, {:.0} % cache hits), {} completion tokens, cost {:.4}",
        totals.calls,
        totals.prompt_tokens,
        totals.cached_tokens,
        totals.cache_written_tokens,
        totals.cache_hit_rate * 100.0,
        totals.completion_tokens,
        totals.cost
    );
    if totals.estimated_calls > 0 {
        let _ = write!(line, " ({} calls estimated)", totals.estimated_calls);
    }
    line
}

/// prompt, the tool schemas and the answer.
pub fn estimate(request: &ChatRequest<'_>, response: &ChatResponse) -> TokenUsage {
    let tool_chars: usize = request.tools.iter().map(|spec| spec.wire_len()).sum();
    // Only the newest images of a prompt are sent (older ones stay a path).
    let images = request
        .messages
        .iter()
        .map(|message| message.images.len())
        .sum::<usize>()
        .min(crate::llm::images::MAX_IMAGES);
    let prompt = approx_tokens(request.messages.iter().map(Arc::as_ref))
        + tool_chars / 4
        + images * IMAGE_TOKENS;
    let calls: usize = response
        .tool_calls
        .iter()
        .map(|call| call.name.len() + call.arguments.to_string().len())
        .sum();
    let answer =
        response.text.len() + response.reasoning_content.as_ref().map_or(0, String::len) + calls;
    TokenUsage {
        prompt: prompt as u64,
        completion: answer.div_ceil(4) as u64,
        cached: 0,
        cache_written: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::ledger::LedgerError;
    use crate::core::ports::llm::BudgetStop;
    use crate::core::ports::usage::{Purpose, TurnSpend};
    use crate::core::session::SessionId;
    use async_trait::async_trait;

    /// A ledger in memory: polls hand out what was appended since the last poll.
    #[derive(Default)]
    struct MemoryLedger {
        records: Mutex<Vec<UsageRecord>>,
        read: Mutex<usize>,
        notices: Mutex<HashSet<(String, NaiveDate)>>,
    }

    #[async_trait]
    impl UsageLedger for MemoryLedger {
        async fn append(&self, record: &UsageRecord) -> Result<(), LedgerError> {
            self.records.lock().unwrap().push(record.clone());
            Ok(())
        }

        async fn first_notice(&self, budget: &str, day: NaiveDate) -> Result<bool, LedgerError> {
            Ok(self
                .notices
                .lock()
                .unwrap()
                .insert((budget.to_owned(), day)))
        }

        async fn poll(&self) -> Result<Vec<UsageRecord>, LedgerError> {
            let records = self.records.lock().unwrap();
            let mut read = self.read.lock().unwrap();
            let new = records[*read..].to_vec();
            *read = records.len();
            Ok(new)
        }
    }

    /// A clock the test moves.
    struct PinnedClock(Mutex<DateTime<Utc>>);

    impl Clock for PinnedClock {
        fn now(&self) -> chrono::DateTime<chrono::FixedOffset> {
            self.0.lock().unwrap().fixed_offset()
        }
    }

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    fn meter(budgets: Budgets, now: &str) -> (Arc<UsageMeter>, Arc<PinnedClock>) {
        let clock = Arc::new(PinnedClock(Mutex::new(utc(now))));
        let prices = HashMap::from([(
            "m".to_owned(),
            Price {
                input: 1.0,
                output: 2.0,
                cached_input: 0.5,
                cache_write: 1.25,
            },
        )]);
        let settings = MeterSettings {
            budgets,
            prices,
            zone: Zone::parse("Europe/Berlin").unwrap(),
        };
        let ledger = Arc::new(MemoryLedger::default());
        let meter = UsageMeter::new(ledger, settings, clock.clone());
        (Arc::new(meter), clock)
    }

    fn response(prompt: u64, completion: u64, cached: u64) -> ChatResponse {
        ChatResponse {
            text: "answer".into(),
            model: "m".into(),
            usage: Some(TokenUsage {
                prompt,
                completion,
                cached,
                cache_written: 0,
            }),
            ..ChatResponse::default()
        }
    }

    async fn spend(meter: &UsageMeter, call: CallTag<'_>, response: &ChatResponse) {
        let request = ChatRequest {
            messages: &[],
            tools: &[],
            call,
        };
        meter.record("default", &request, response).await;
    }

    #[tokio::test]
    async fn totals_keep_cache_reads_writes_and_the_hit_rate() {
        let (meter, _) = meter(Budgets::default(), "2026-11-24T10:00:00Z");
        let turn = CallTag::new(Purpose::Turn);
        let mut first = response(1000, 10, 0);
        if let Some(usage) = first.usage.as_mut() {
            usage.cache_written = 800;
        }
        spend(&meter, turn, &first).await;
        spend(&meter, turn, &response(1000, 10, 800)).await;
        let today = meter.status().await.today;
        assert_eq!(
            (today.cached_tokens, today.cache_written_tokens),
            (800, 800)
        );
        assert!((today.cache_hit_rate - 0.4).abs() < 1e-12, "{today:?}");
        // 200 fresh + 800 written, then 200 fresh + 800 read, at 1, 1.25 and 0.5 per million.
        let expected = (400.0 + 800.0 * 1.25 + 800.0 * 0.5 + 20.0 * 2.0) / 1e6;
        assert!((today.cost - expected).abs() < 1e-12, "{today:?}");
        let line = meter.line().await;
        assert!(
            line.contains("cache today: 800 read, 800 written, 40 % hit"),
            "{line}"
        );
        let mut month = Totals::default();
        month.merge(&today);
        assert_eq!(month, today);
    }

    #[tokio::test]
    async fn the_daily_budget_stops_calls_until_the_owners_midnight() {
        let budgets = Budgets {
            daily_tokens: Some(100),
            ..Budgets::default()
        };
        // 22:30 UTC is 23:30 in Berlin.
        let (meter, clock) = meter(budgets, "2026-11-24T22:30:00Z");
        let turn = CallTag::new(Purpose::Turn);
        assert!(meter.admit(turn).await.is_ok());
        spend(&meter, turn, &response(90, 10, 0)).await;
        let error = meter.admit(turn).await.unwrap_err();
        assert!(
            matches!(&error, LlmError::Budget { stop, notify: true }
                if stop.kind == BudgetKind::DailyTokens && stop.message().contains("in 0 h 30 min")),
            "{error:?}"
        );
        // Midnight in Berlin (23:00 UTC) starts a new day.
        *clock.0.lock().unwrap() = utc("2026-11-24T23:00:00Z");
        assert!(meter.admit(turn).await.is_ok());
        let status = meter.status().await;
        assert_eq!(status.today.calls, 0);
        assert_eq!(status.month.tokens(), 100);
    }

    #[tokio::test]
    async fn scheduled_calls_are_skipped_and_the_owner_told_once_a_day() {
        let budgets = Budgets {
            daily_cost: Some(0.0001),
            ..Budgets::default()
        };
        let (meter, _) = meter(budgets, "2026-11-24T10:00:00Z");
        let turn = CallTag::new(Purpose::Turn);
        spend(&meter, turn, &response(1000, 100, 0)).await;
        let heartbeat = CallTag::new(Purpose::Heartbeat);
        let notify = |result: Result<(), LlmError>| match result {
            Err(LlmError::Budget { notify, .. }) => notify,
            other => panic!("{other:?}"),
        };
        assert!(notify(meter.admit(heartbeat).await));
        assert!(!notify(meter.admit(heartbeat).await));
        assert!(!notify(meter.admit(CallTag::new(Purpose::Cron)).await));
        // A person always gets the answer.
        assert!(notify(meter.admit(turn).await));
        let status = meter.status().await;
        assert_eq!(status.skipped["heartbeat"].count, 2);
        assert_eq!(status.skipped["cron"].last_budget, "budgets.daily_cost");
        assert!(status.budgets["budgets.daily_cost"].reached);
    }

    #[tokio::test]
    async fn a_turn_budget_counts_only_its_own_rounds() {
        let budgets = Budgets {
            turn_tokens: Some(50),
            ..Budgets::default()
        };
        let (meter, _) = meter(budgets, "2026-11-24T10:00:00Z");
        let session = SessionId::parse("http:a").unwrap();
        let first = TurnSpend::default();
        let call = CallTag {
            purpose: Purpose::Turn,
            session: Some(&session),
            turn: Some(&first),
        };
        spend(&meter, call, &response(40, 10, 0)).await;
        assert_eq!(first.tokens(), 50);
        let error = meter.admit(call).await.unwrap_err();
        assert!(matches!(
            error,
            LlmError::Budget {
                stop: BudgetStop {
                    kind: BudgetKind::TurnTokens,
                    ..
                },
                ..
            }
        ));
        let second = TurnSpend::default();
        let fresh = CallTag {
            turn: Some(&second),
            ..call
        };
        assert!(meter.admit(fresh).await.is_ok());
        // Consolidation has no turn budget.
        assert!(
            meter
                .admit(CallTag {
                    purpose: Purpose::Consolidation,
                    ..call
                })
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn an_answer_without_usage_is_estimated_and_marked() {
        let (meter, _) = meter(Budgets::default(), "2026-11-24T10:00:00Z");
        let mut silent = response(0, 0, 0);
        silent.usage = None;
        silent.text = "x".repeat(40);
        let prompt = [Arc::new(crate::core::message::Message::new(
            crate::core::message::Role::User,
            "y".repeat(400),
            utc("2026-11-24T10:00:00Z").fixed_offset(),
        ))];
        let request = ChatRequest {
            messages: &prompt,
            tools: &[],
            call: CallTag::new(Purpose::Turn),
        };
        meter.record("default", &request, &silent).await;
        let status = meter.status().await;
        assert_eq!(status.today.estimated_calls, 1);
        assert_eq!(status.today.completion_tokens, 10);
        assert!(status.today.prompt_tokens >= 100, "{:?}", status.today);
        assert!(status.today.cost > 0.0);
    }

    #[test]
    fn images_are_estimated_only_as_many_as_are_sent() {
        let now = utc("2026-11-24T10:00:00Z").fixed_offset();
        let mut message =
            crate::core::message::Message::new(crate::core::message::Role::User, "", now);
        let request = |messages: &[Arc<crate::core::message::Message>]| {
            estimate(
                &ChatRequest {
                    messages,
                    tools: &[],
                    call: CallTag::new(Purpose::Turn),
                },
                &ChatResponse::default(),
            )
            .prompt
        };
        let bare = request(&[Arc::new(message.clone())]);
        message.images = vec!["a.png".into()];
        let one = request(&[Arc::new(message.clone())]);
        assert_eq!(one - bare, IMAGE_TOKENS as u64);
        message.images = vec!["a.png".into(); 9];
        let nine = request(&[Arc::new(message)]);
        assert_eq!(
            nine - bare,
            (IMAGE_TOKENS * crate::llm::images::MAX_IMAGES) as u64
        );
    }
}
