//! Link settings for the `squidbot` binary: two ways to keep the code it maps in small.
//!
//! - Packed relative relocations (`DT_RELR`, `-z pack-relative-relocs`): the binary stays
//!   position-independent (ASLR), but its ~144 000 relative relocations take 45 KB instead of
//!   3.4 MB of `RELA` entries that the loader read at every start. Needs glibc 2.36+ at run time
//!   (Debian 12, Ubuntu 22.10 and later), so it is only on for a native Linux build on such a
//!   glibc: squidbot is built where it runs.
//! - Startup functions first: the ~6 000 functions that run while squidbot starts, idles and
//!   answers (`scripts/build/startup-functions.txt`, listed by `scripts/build/startup_symbols.py`) are
//!   laid out together at the front of `.text`. The kernel maps code in 64 KB windows around
//!   each page that runs; scattered over 38 MB, those functions kept ~15 MB of code resident.
//!   The list names functions without the hashes in their symbols, which follow Cargo's
//!   metadata (versions, features, the profile) and made a list of exact names decay to a
//!   quarter within a day; `scripts/build/startup-order`, the linker driver that
//!   `.cargo/config.toml` sets for x86_64 Linux, resolves them against the objects of each
//!   link and hands LLD the exact names (`--symbol-ordering-file`). So this asks for it only
//!   when that driver links (and it needs rustc's own LLD, the default since Rust 1.90), and
//!   only for release builds. A name no longer in the code is skipped: a stale entry costs
//!   memory, never correctness.
//!
//! BENCHMARKS.md has the numbers. Only the binaries get these flags; the library and the
//! dependencies are unchanged.

use std::path::Path;
use std::process::Command;

/// The first glibc whose loader understands `DT_RELR`.
const RELR_GLIBC: (u32, u32) = (2, 36);

/// Where to write the link map, when set.
const LINK_MAP_ENV: &str = "SQUIDBOT_LINK_MAP";

/// The startup functions, by name without hashes, relative to the package root.
const ORDER_FILE: &str = "scripts/build/startup-functions.txt";

/// The linker driver that resolves [`ORDER_FILE`] at link time (see `.cargo/config.toml`).
const ORDER_LINKER: &str = "scripts/build/startup-order";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={ORDER_FILE}");
    println!("cargo:rerun-if-changed={ORDER_LINKER}");
    println!("cargo:rerun-if-env-changed={LINK_MAP_ENV}");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    // A link map names every function's address in the binary, stripped or not: the profile
    // scripts name what they measured by it, and the order check reads it (see ORDER_FILE).
    if let Some(map) = std::env::var_os(LINK_MAP_ENV) {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,-Map={}",
            Path::new(&map).display()
        );
    }
    let target = std::env::var("TARGET").unwrap_or_default();
    let native = std::env::var("HOST").is_ok_and(|host| host == target);
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if native && linux_gnu && host_glibc().is_some_and(|v| v >= RELR_GLIBC) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let order = Path::new(env!("CARGO_MANIFEST_DIR")).join(ORDER_FILE);
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    if release && order_linker() && order.is_file() {
        println!(
            "cargo:rustc-link-arg-bins=--squidbot-startup-order={}",
            order.display()
        );
    }
}

/// Whether the binary is linked by [`ORDER_LINKER`] with rustc's self-contained LLD: that
/// driver is the configured linker and no flag changes the linker or its flavour.
fn order_linker() -> bool {
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    std::env::var("RUSTC_LINKER").is_ok_and(|linker| linker.ends_with(ORDER_LINKER))
        && !["linker", "link-self-contained", "fuse-ld"]
            .iter()
            .any(|flag| flags.contains(flag))
}

/// The build machine's glibc version, from `getconf GNU_LIBC_VERSION` ("glibc 2.36").
fn host_glibc() -> Option<(u32, u32)> {
    let output = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let version = text.trim().strip_prefix("glibc ")?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .trim_end_matches(|c: char| !c.is_ascii_digit());
    Some((major, minor.parse().ok()?))
}
