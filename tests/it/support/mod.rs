//! Test support shared by the test binaries (`tests/it`, `tests/servers`, `tests/proof`): the
//! scripted LLM, the binary on a fresh home, a real gateway process and its fixtures.
//!
//! The clients of the real test servers (Synapse, dovecot) live beside the suites that need
//! them, in `tests/servers/support/`, so this binary builds and runs without those servers.

pub mod bin;
pub mod config;
pub mod daemon;
pub mod gateway;
pub mod home;
pub mod images;
pub mod scripted_llm;

/// A loopback TCP port nothing listens on right now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}
