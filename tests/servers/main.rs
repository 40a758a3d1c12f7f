//! The suites that need the real test servers: Synapse for Matrix, dovecot and an SMTP front end
//! for mail, as `scripts/testenv/up` starts them. A binary of its own so `cargo test` on a
//! machine without them runs every other suite and passes: Cargo.toml marks this target
//! `test = false`, so only `cargo test --test servers` (which `scripts/test` runs) builds and
//! runs it. Run without the servers' variables, every test here fails and says how to start
//! them (`support::testenv::var`); none skips.

// matrix-sdk's futures are deep; proving the test client's sync task `Send` needs more room.
#![recursion_limit = "256"]

// The shared test support and the clients of the real servers.
mod support;
// The scripted model's default answers (`default_reply`), shared with `tests/it`.
#[allow(dead_code)]
#[path = "../it/harness.rs"]
mod harness;
// The real test servers (Synapse, dovecot + SMTP) are up and answer.
mod testenv;
// A real gateway logged in to the test Synapse, for the Matrix tests.
mod bot_gateway;
// The Matrix channel against real Synapse with a real matrix-sdk client as the human.
mod matrix;
// Chat commands in a Matrix room: /model and /new.
mod matrix_commands;
// Room keys when the bot and a member's device meet: rotated, never re-sent at a later index.
mod matrix_keys;
// Sync gaps filled: messages sent while the bot was away, all answered in order.
mod matrix_gaps;
// The human side played by matrix-nio with libolm, an independent client.
mod matrix_nio;
// Matrix rooms with someone besides the owner get none of the owner's private memory.
mod matrix_privacy;
// Authority follows who asked: a guest in a shared room cannot schedule or rewrite instructions.
mod matrix_authority;
// Authority by effect, walked over every registered tool (#35).
mod authority_walk;
// Approvals answered in a Matrix room: only the owner's `yes CODE` counts.
mod matrix_approvals;
// Approvals answered by mail: the owner replies with the code; strangers are never asked.
mod email_approvals;
// The email channel against real dovecot + SMTP: parsing, threading, loop guard, restarts.
mod email;
// Real mail from public corpora, on dovecot.
mod email_corpus;
// Crashes at each step of a mail, a first start on a used mailbox, the rate limit.
mod email_crash;
// #25: images people send by mail and in encrypted rooms reach a model that reads images.
mod vision;
// `squidbot doctor` checking Matrix and mail logins against the real servers.
mod doctor;
// Voice notes (#38) on Matrix, transcribed by a real Whisper on loopback: an encrypted DM,
// a room where the bot is addressed aloud.
mod voice;
// Voice notes whose transcription fails: the server down, slow or refusing.
mod voice_faults;
// Voice notes by mail: an audio attachment transcribed beside the text.
mod voice_mail;
// #39: the OpenAI-compatible endpoint driven by the `openai` SDK and the `llm` CLI (installed
// by scripts/testenv/openai_clients.sh, as the servers are).
mod openai;
mod openai_rules;
