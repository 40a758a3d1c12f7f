//! Accounting: what the LLM calls cost, the budgets that stop them, and the client layer where
//! both happen.
//!
//! - [`budget`]: the limits (`budgets.*`), the owner's day they count in, the stop message.
//! - [`price`]: [`price::Price`], what a call costs (cache reads and writes apart), and
//!   [`price::Totals`], the sums of records with the cache hit rate.
//! - [`ledger`]: [`ledger::UsageLedger`], the append-only record of calls storage keeps, and its
//!   line [`ledger::UsageRecord`].
//! - [`meter`]: [`meter::UsageMeter`], the running totals folded from the ledger, the prices,
//!   and the admission check before each call.
//! - [`layer`]: [`layer::AccountedLlm`], the outermost layer of each pool's client: admit,
//!   record (a call cut short included) and tell the metrics, in one place.
//! - [`transcription`]: [`transcription::AccountedTranscriber`], voice notes transcribed,
//!   recorded by the seconds of audio and their cost.
//!
//! Outside `core`: the agent loop sees only the ports (`LlmClient::admit`, `SpendReport`), so
//! how calls are priced and limited can change without touching the domain.

pub mod budget;
pub mod layer;
pub mod ledger;
pub mod meter;
pub mod price;
pub mod transcription;
