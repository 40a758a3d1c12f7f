//! Test support shared by the integration tests: fakes of the servers squidbot talks to.

pub mod bin;
pub mod scripted_llm;
