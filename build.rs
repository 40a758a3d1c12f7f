//! Link settings for the `squidbot` binary.
//!
//! The binary stays position-independent (ASLR), but its ~144 000 relative relocations are
//! stored packed (`DT_RELR`, `-z pack-relative-relocs`) instead of as 24-byte `RELA` entries:
//! the dynamic loader then reads 45 KB at start instead of 3.4 MB, pages every squidbot process
//! would otherwise map in (idle gateway RSS 24.9 → 22.2 MiB, one-shot turn 12.2 → 8.2 ms; see
//! BENCHMARKS.md). The result needs glibc 2.36+ at run time (Debian 12, Ubuntu 22.10 and
//! later), so it is only turned on for a native Linux build on such a glibc: squidbot is
//! built where it runs. Only the binaries get it; the library and the dependencies are
//! unchanged.

use std::process::Command;

/// The first glibc whose loader understands `DT_RELR`.
const RELR_GLIBC: (u32, u32) = (2, 36);

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let native = std::env::var("TARGET").ok() == std::env::var("HOST").ok();
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if native && linux_gnu && host_glibc().is_some_and(|v| v >= RELR_GLIBC) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
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
