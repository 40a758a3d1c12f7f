# What each crate costs in the release binary's code, as `cargo bloat --crates` would say:
# every function symbol's size (`nm --print-size`, demangled), summed by the crate its path
# starts with. A generic function counts for the crate that defines it, wherever it was
# instantiated (serde's code for squidbot's types is serde's), and C code without a Rust path
# (SQLite, the C libraries' glue) counts as `[C]`; drop glue counts for the type it drops.
#
#   CARGO_PROFILE_RELEASE_STRIP=none CARGO_TARGET_DIR=target/symbols cargo build --release
#   python3 scripts/bench/crate_sizes.py target/symbols/release/squidbot [TOP]
#
# The release profile strips symbols, so measure a build with stripping off (the same code).
import collections, re, subprocess, sys

if len(sys.argv) < 2:
    sys.exit(__doc__ if __doc__ else "usage: crate_sizes.py BINARY [TOP]")
BINARY = sys.argv[1]
TOP = int(sys.argv[2]) if len(sys.argv) > 2 else 40


def crate_of(name):
    """The crate a demangled Rust path starts with: `<A as B>::f` counts for A's crate, the
    drop glue `core::ptr::drop_in_place<A>` too; `[C]` for a name without a path."""
    name = name.removeprefix("core::ptr::drop_in_place::<").removeprefix("core::ptr::drop_in_place<")
    name = name.lstrip("<&*").removeprefix("mut ").removeprefix("dyn ").lstrip("<&*(")
    match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)::", name)
    return match.group(1) if match else "[C]"


out = subprocess.run(["nm", "--print-size", "--size-sort", "--demangle", BINARY],
                     capture_output=True, text=True, check=True).stdout
sizes = collections.Counter()
total = 0
for line in out.splitlines():
    parts = line.split(" ", 3)
    if len(parts) < 4 or parts[2] not in "tTwW":
        continue
    size = int(parts[1], 16)
    sizes[crate_of(parts[3])] += size
    total += size
print(f"{BINARY}: {total / 1e6:.1f} MB of functions in symbols")
print("| crate | code | share |\n|---|---|---|")
for crate, size in sizes.most_common(TOP):
    print(f"| {crate} | {size / 1e6:.2f} MB | {size / total * 100:.1f} % |")
