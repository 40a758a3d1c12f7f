//! The integration test binary: every suite that drives squidbot over real files and HTTP and
//! needs nothing but this machine (the scripted LLM runs in the binary). The suites that need
//! the real test servers (Synapse, dovecot) are the `servers` binary (`tests/servers/`).

// The scripted OpenAI-compatible server and other shared test support.
mod support;
// A real agent over real files and the scripted LLM, fresh per test.
mod harness;
// The LLM adapter: streaming, tool calls, retries, fallback, timeouts, faults.
mod llm;
// #25: recorded responses of real providers, replayed into the real binary.
mod provider_replays;
mod request_shapes;
// #36: OpenAI's Responses API: recorded streams replayed, and the request's documented shape.
mod responses_replays;
// #36: Anthropic's Messages API: recorded streams, request shapes, caching, fallback.
mod anthropic;
// #25: an image read with read_file reaches a model that reads images as an image.
mod vision;
// The memory system: consolidation, cursor, prompt layout, restarts, concurrency.
mod memory;
// The agent loop: tool rounds, persistence, errors, extra tools.
mod agent;
// The router with a real agent: typed origins, activity, per-turn tools, sender ids.
mod router;
// The `squidbot` binary: one-shot agent, config errors, status, onboard.
mod cli;
// The interactive `squidbot agent` through pipes: streaming, Ctrl-C cancels a turn, leaving.
mod terminal;
// `squidbot service install|uninstall|status` with a stand-in systemctl.
mod service_cli;
// The gateway end to end: HTTP API, auth, ordering, status, metrics, restarts, SIGTERM.
mod gateway;
mod gateway_lifecycle;
// What reaches the disk before an answer leaves, read from strace.
mod durability;
// Chat commands (/help, /status, /stop) through a real gateway.
mod commands;
// `squidbot cron`: add, list, enable, disable, remove through the binary.
mod cron_cli;
// spawn with profiles: sub-agent sessions, tools, prompts, pools, concurrency, pruning.
mod spawn;
// `squidbot skills list` through the binary: bundled, workspace and extra skills, gating.
mod skills_cli;
// `squidbot doctor` through the binary: passing and failing checks.
mod doctor_cli;
// `squidbot import DIR` through the binary: an original home brought over, idempotently.
mod import_cli;
// Two processes on one home: a second gateway refused, MEMORY.md written by two at once.
mod two_processes;
// `search_history` through the binary: ranked recall, the asking turn left out, summaries,
// unforgeable output, index rebuilds.
mod search_history;
// The owner's memory stays private: shared rooms get no MEMORY.md, USER.md or memory_write.
mod privacy;
// The model of trust (#16): the shell sandbox, secrets redacted, untrusted text fenced.
mod trust;
// Fail closed: without Landlock the shell is off and says why.
mod jail_unavailable;
// Private files and an owner from the first minute.
mod private_home;
// The owner approves risky shell commands (#16 item 2) through the real gateway.
mod approvals;
// Token usage: the ledger, /metrics, /status, `squidbot usage` and budgets, against the
// usage the scripted LLM reported.
mod usage;
// Regressions of reported issues (`issue_N_…`) against the real binary.
mod regression;
