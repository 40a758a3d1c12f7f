//! `scripts/build/startup-order`, the linker driver that keeps the startup layout from decaying
//! (#26): given a list of function names without their metadata hashes, it must find the
//! functions of *another* build (other crate disambiguators, as another feature set, profile
//! or dependency version gives) among the objects of the link and hand the linker their exact
//! names, in the list's order, and otherwise pass the link through untouched.
//!
//! Real objects made by rustc with two different `-C metadata` values stand for the profiled
//! build and the one being linked; the compiler driver is replaced (`SQUIDBOT_CC`) by a script
//! that records the arguments it is given.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A library with a generic function used at two types, and functions that never run.
const SOURCE: &str = r#"
#[inline(never)]
pub fn used<T: core::fmt::Debug>(value: T) -> usize { format!("{value:?}").len() }
#[inline(never)]
pub fn startup() -> usize { used(1u8) + used("text") }
#[inline(never)]
pub fn never_run(x: u64) -> u64 { x.rotate_left(7) ^ 0x5bd1e995 }
"#;

/// Compiles [`SOURCE`] to an object with `metadata`, as Cargo would for one build.
fn object(dir: &Path, metadata: &str) -> PathBuf {
    let source = dir.join("startup_lib.rs");
    std::fs::write(&source, SOURCE).unwrap();
    let out = dir.join(format!("{metadata}.o"));
    let status = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args([
            "--crate-type=lib",
            "--emit=obj",
            "-O",
            "-Csymbol-mangling-version=v0",
        ])
        .arg(format!("-Cmetadata={metadata}"))
        .arg("-o")
        .arg(&out)
        .arg(&source)
        .status()
        .unwrap();
    assert!(status.success());
    out
}

/// The text symbols an object defines.
fn names(object: &Path) -> Vec<String> {
    let out = Command::new("nm")
        .arg("--defined-only")
        .arg(object)
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| {
            let parts: Vec<&str> = line.split_whitespace().collect();
            (parts.len() == 3 && "tTwW".contains(parts[1])).then(|| parts[2].to_owned())
        })
        .collect()
}

/// The driver's rule for a v0 name, restated: `Cs…_` (crate disambiguators) and `B…_` (back
/// references) lose what is between, as `sed 's/Cs[0-9A-Za-z]*_/Cs_/g; s/B[0-9A-Za-z]*_/B_/g'`,
/// and a generic instance's instantiating crate at the end (a last `B_`, or a last `Cs_` with
/// a crate name of the length it gives) goes.
fn normalized(name: &str) -> String {
    let name = name.split(".llvm.").next().unwrap_or(name);
    let name = collapse(&collapse(name, "Cs"), "B");
    if let Some(stripped) = name.strip_suffix("B_") {
        return stripped.to_owned();
    }
    if let Some(at) = name.rfind("Cs_") {
        let tail = &name[at + 3..];
        let digits = tail.len() - tail.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 && tail[..digits].parse::<usize>() == Ok(tail.len() - digits) {
            return name[..at].to_owned();
        }
    }
    name
}

/// Each `prefix`, alphanumerics, `_` in `text` as `prefix_`, leftmost first.
fn collapse(text: &str, prefix: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at]);
        let after = &rest[at + prefix.len()..];
        let run = after.len()
            - after
                .trim_start_matches(|c: char| c.is_ascii_alphanumeric())
                .len();
        if after[run..].starts_with('_') {
            out.push_str(prefix);
            out.push('_');
            rest = &after[run + 1..];
        } else {
            out.push_str(&rest[at..at + 1]);
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn listed_functions_of_another_build_are_ordered_by_their_exact_names() {
    if Command::new("nm").arg("--version").output().is_err() {
        panic!("nm (binutils) is needed: the driver uses it");
    }
    let dir = tempfile::tempdir().unwrap();
    let profiled = object(dir.path(), "profiledbuild");
    let linked = object(dir.path(), "otherbuild");
    let profiled_names = names(&profiled);
    let linked_names = names(&linked);
    assert!(
        profiled_names
            .iter()
            .filter(|name| name.contains("startup_lib"))
            .all(|name| !linked_names.contains(name)),
        "the two builds name their functions differently: {profiled_names:?} / {linked_names:?}"
    );
    // The list, in profile order: `startup`, then `used::<&str>`, not `used::<u8>` or
    // `never_run`; `<&str as Debug>::fmt`, a generic instance whose name ends with the crate
    // that instantiated it (here the same crate under another hash; in a real link often
    // another crate, whichever upstream copy the build took); a name no build has; and a C
    // function, which has no hash to resolve.
    let pick = |names: &[String], part: &str| {
        names
            .iter()
            .find(|name| name.contains(part))
            .unwrap_or_else(|| panic!("no {part} in {names:?}"))
            .clone()
    };
    let list = [
        normalized(&pick(&profiled_names, "7startup")),
        normalized(&pick(&profiled_names, "4usedRe")),
        normalized(&pick(&profiled_names, "5Debug3fmt")),
        "_RNvCs_5other4gone".to_owned(),
        "sqlite3_open".to_owned(),
    ];
    let list_path = dir.path().join("startup-functions.txt");
    std::fs::write(&list_path, list.join("\n") + "\n").unwrap();
    let args_path = dir.path().join("cc-args.txt");
    let cc = dir.path().join("cc");
    std::fs::write(
        &cc,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\n",
            args_path.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let output = dir.path().join("squidbot");
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build/startup-order");
    let status = Command::new(&driver)
        .env("SQUIDBOT_CC", &cc)
        .arg(&linked)
        .arg("-o")
        .arg(&output)
        .arg(format!("--squidbot-startup-order={}", list_path.display()))
        .arg("-Wl,--gc-sections")
        .status()
        .unwrap();
    assert!(status.success());

    let order = std::fs::read_to_string(dir.path().join("squidbot.startup-order")).unwrap();
    let order: Vec<&str> = order.lines().collect();
    assert_eq!(
        order,
        [
            pick(&linked_names, "7startup").as_str(),
            pick(&linked_names, "4usedRe").as_str(),
            pick(&linked_names, "5Debug3fmt").as_str(),
            "sqlite3_open",
        ],
        "the other build's exact names and the C name as it is, in the list's order"
    );
    let stats = std::fs::read_to_string(dir.path().join("squidbot.startup-order.stats")).unwrap();
    assert_eq!(
        stats.trim(),
        "3 of 4 listed Rust functions found, 1 other names passed on"
    );
    let args = std::fs::read_to_string(&args_path).unwrap();
    let args: Vec<&str> = args.lines().collect();
    let ordering = format!(
        "-Wl,--symbol-ordering-file={}",
        dir.path().join("squidbot.startup-order").display()
    );
    assert_eq!(
        args,
        [
            linked.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
            "-Wl,--gc-sections",
            ordering.as_str(),
            "-Wl,--no-warn-symbol-ordering"
        ]
    );

    // Without the request, the link goes through untouched.
    std::fs::remove_file(&args_path).unwrap();
    let status = Command::new(&driver)
        .env("SQUIDBOT_CC", &cc)
        .args(["x.o", "-o", "out", "-Wl,-O1"])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        std::fs::read_to_string(&args_path).unwrap(),
        "x.o\n-o\nout\n-Wl,-O1\n"
    );
}

/// `startup_symbols.py --check --min PERCENT` (what `scripts/test` runs on the release build)
/// fails when the last link found fewer of the listed functions than that, and passes at or
/// above it; without a release link it fails too, rather than passing on nothing.
#[test]
fn the_check_fails_below_its_threshold() {
    let target = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build/startup_symbols.py");
    let check = |minimum: &str| {
        Command::new("python3")
            .arg(&script)
            .args(["--check", "--min", minimum])
            .env("CARGO_TARGET_DIR", target.path())
            .output()
            .unwrap()
    };
    let none = check("90");
    assert!(!none.status.success());
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("no release link"),
        "{none:?}"
    );
    let deps = target.path().join("release/deps");
    std::fs::create_dir_all(&deps).unwrap();
    std::fs::write(
        deps.join("squidbot-0123abcd.startup-order.stats"),
        "850 of 1000 listed Rust functions found, 12 other names passed on\n",
    )
    .unwrap();
    let below = check("90");
    assert!(!below.status.success(), "{below:?}");
    assert!(
        String::from_utf8_lossy(&below.stderr).contains("only 85.0 %"),
        "{below:?}"
    );
    let above = check("85");
    assert!(above.status.success(), "{above:?}");
    assert!(
        String::from_utf8_lossy(&above.stdout).contains("85.0 % found"),
        "{above:?}"
    );
}
