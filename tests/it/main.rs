//! The integration test binary: one module per adapter, run against real servers over loopback.

// Fakes and helpers shared by the tests (the scripted OpenAI-compatible server).
mod support;
// The LLM adapter against the scripted server: streaming, tool calls, retries, fallback, timeouts.
mod llm;
