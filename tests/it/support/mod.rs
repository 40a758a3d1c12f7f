//! Test support shared by the integration tests: the scripted LLM, the binary, and the real
//! servers (Synapse, dovecot) started by `scripts/testenv/up`.

pub mod bin;
pub mod mail_client;
pub mod matrix_client;
pub mod scripted_llm;
pub mod testenv;
