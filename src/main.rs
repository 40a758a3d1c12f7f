//! The `squidbot` binary: the composition root.
//!
//! It parses the command line, loads the configuration, builds the adapters and hands them to
//! the core. It is the only place that uses `anyhow`: every error ends here as a message on
//! stderr and a non-zero exit code.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
