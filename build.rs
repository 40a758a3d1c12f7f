//! Link settings for the `squidbot` binary: two ways to keep the code it maps in small.
//!
//! - Packed relative relocations (`DT_RELR`, `-z pack-relative-relocs`): the binary stays
//!   position-independent (ASLR), but its ~144 000 relative relocations take 45 KB instead of
//!   3.4 MB of `RELA` entries that the loader read at every start. Needs glibc 2.36+ at run time
//!   (Debian 12, Ubuntu 22.10 and later), so it is only on for a native Linux build on such a
//!   glibc: squidbot is built where it runs.
//! - Startup functions first (`--symbol-ordering-file build/startup-symbols.txt`): the ~12 000
//!   functions that run while squidbot starts, idles and answers (listed by
//!   `scripts/build/startup_symbols.py`) are laid out together at the front of `.text`. The
//!   kernel maps code in 64 KB windows around each page that runs; scattered over 38 MB, those
//!   functions kept ~15 MB of code resident. Only with rustc's own LLD, the default linker of
//!   `x86_64-unknown-linux-gnu` since Rust 1.90, and not when a custom linker is configured.
//!   Release builds only (the names carry the profile's hashes). Names a build no longer has
//!   are skipped: a stale list costs memory, never correctness. The hashes follow Cargo's
//!   metadata (versions, features, the profile, `strip` included), not the code: the list of
//!   2026-11-26 matched 27 % of the names of a release build made the same day, and since the
//!   profile strips symbols, a list profiled from an unstripped build matches none. It is to be
//!   replaced by an order the build derives itself (issue #26).
//!
//! BENCHMARKS.md has the numbers. Only the binaries get these flags; the library and the
//! dependencies are unchanged.

use std::path::Path;
use std::process::Command;

/// The first glibc whose loader understands `DT_RELR`.
const RELR_GLIBC: (u32, u32) = (2, 36);

/// The function order handed to the linker, relative to the package root.
const ORDER_FILE: &str = "build/startup-symbols.txt";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={ORDER_FILE}");
    let target = std::env::var("TARGET").unwrap_or_default();
    let native = std::env::var("HOST").is_ok_and(|host| host == target);
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if native && linux_gnu && host_glibc().is_some_and(|v| v >= RELR_GLIBC) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let order = Path::new(env!("CARGO_MANIFEST_DIR")).join(ORDER_FILE);
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    if release && target == "x86_64-unknown-linux-gnu" && default_linker() && order.is_file() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether the binary is linked the default way (rustc's self-contained LLD): no linker is
/// configured for the target and no flag changes the linker or its flavour.
fn default_linker() -> bool {
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    std::env::var_os("RUSTC_LINKER").is_none()
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
