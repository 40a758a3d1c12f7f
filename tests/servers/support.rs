//! The support of the server suites: everything `tests/it/support` shares, and the clients
//! that play the human on the real servers (a matrix-sdk user, an IMAP/SMTP mailbox) with the
//! servers' addresses (`testenv`).

// Each test binary uses its own part of the shared support; `tests/it`, which uses the most,
// keeps the dead-code lint for it.
#[allow(dead_code)]
#[path = "../it/support/mod.rs"]
mod shared;

pub use shared::*;

pub mod mail_client;
pub mod mail_scene;
pub mod matrix_client;
pub mod privacy;
pub mod testenv;
