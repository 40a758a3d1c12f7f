//! The slow proof suites of issue #7, run by `scripts/proof <suite>` (never by `cargo test`
//! alone: every test here is `#[ignore]`d, and the script runs them with `--ignored` in
//! release mode). Each prints what it measured; BENCHMARKS.md records the results.

// matrix-sdk's futures (in the shared support) are deep; proving them `Send` needs more room.
#![recursion_limit = "256"]

// Shared with the integration tests: the scripted LLM and running the binary.
#[path = "../it/support/mod.rs"]
#[allow(dead_code)]
mod support;

// What the crash and fault suites share: the scripted summarizer and the cursor-within-summary
// check.
mod summaries;

// SIGKILL under load, 200 times; every file loads and nothing is lost or answered twice.
mod crash;

// The LLM misbehaving at random for 1 000 turns: every turn ends cleanly, no panic.
mod faults;

// llama.cpp's server through `squidbot agent` and the gateway (scripts/proof compat).
mod compat;
