//! Test support shared by the integration tests: fakes of the servers squidbot talks to.

pub mod scripted_llm;
