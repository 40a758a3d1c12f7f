# Regenerates scripts/build/startup-functions.txt: the functions of the squidbot binary that run while it
# starts, idles and answers, which the release link lays out together at the front of .text
# (build.rs, scripts/build/startup-order). The kernel maps code in 64 KB at a time around each
# page that runs; with these functions spread over 38 MB of code, an idle gateway kept ~15 MB of
# it resident. Clustered, a few MB cover them.
#
#   SQUIDBOT_LINK_MAP=/tmp/squidbot.map cargo build --release
#   SQUIDBOT_LINK_MAP=/tmp/squidbot.map python3 scripts/build/startup_symbols.py [TESTENV_DIR]
#   cargo build --release     # relinks with the new order
#
# The release build itself is profiled: callgrind records the addresses of the functions that
# ran, and the link map that build.rs had the linker write (SQUIDBOT_LINK_MAP) names them. A
# build with its symbols kept is other code: stripping is part of Cargo's metadata, so its
# crates carry other hashes, and where LLVM inlines and which upstream copy of a generic
# instance a crate built for size takes follow those hashes (profiled that way, 29 of the 73
# code pages an idle release gateway faulted in held functions the list lacked). Without
# SQUIDBOT_LINK_MAP, callgrind names the functions of an unstripped build
# (CARGO_PROFILE_RELEASE_STRIP=none) by its symbols. Either way the list keeps each name
# without what follows Cargo's metadata (`normalize`), which is what makes it outlive
# dependency upgrades and feature changes: scripts/build/startup-order resolves the names
# against each link. After a release build, `--check` says how many it found there.
#
# Needs valgrind (callgrind records every function that ran, by its mangled name). Workloads,
# each against the instant LLM of scripts/bench/instant_llm.py: a gateway as an owner runs it
# (HTTP API, heartbeat, cron) that starts and idles for 10 s, whose code stays resident for as
# long as the daemon runs; the same gateway answering three API turns; a one-shot `agent -m`;
# and, with the test servers of scripts/testenv/up (TESTENV_DIR),
# scripts/bench/channel_latency.py, whose gateway runs Matrix and email. The list is laid out
# by which workloads run a function (see `symbols`), so each workload's code is one run of it.
# With a link map and `perf`, the idle gateway and the one-shot also run outside valgrind,
# their code page faults recorded (`faulted`): what valgrind's own paths hide from callgrind.
# What those runs found accumulates in scripts/build/startup-faults.txt (see `remember_faults`).
# The kernel maps code 64 KB around each page that runs, so one function of another workload
# placed among the idle ones costs 64 KB for as long as the daemon lives: an idle gateway
# profiled without the heartbeat ran 40 such functions spread over 6 MB (measured on the
# stripped binary under callgrind, mapped to the link map). Names that a later build no longer
# has are skipped by the linker; a stale list costs memory, never correctness. Regenerate when
# --check finds much less than all.
import bisect, functools, glob, json, os, re, shutil, signal, subprocess, sys, tempfile, time, urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import instant_llm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = ROOT + "/scripts/build/startup-functions.txt"
FAULTS = ROOT + "/scripts/build/startup-faults.txt"
if sys.argv[1:2] == ["--check"]:
    # --check [--min PERCENT]: how many listed Rust functions the last release link found, and
    # a failure below PERCENT (scripts/test asks for CHECK_MIN): a list that no longer matches
    # the code it orders is how the startup layout decayed before (#26), silently.
    minimum = float(sys.argv[3]) if sys.argv[2:3] == ["--min"] else None
    target = os.environ.get("CARGO_TARGET_DIR", ROOT + "/target")
    stats = sorted(glob.glob(target + "/release/deps/squidbot-*.startup-order.stats"),
                   key=os.path.getmtime)
    if not stats:
        sys.exit(f"no release link with the startup order under {target}: cargo build --release")
    line = open(stats[-1]).read().strip()
    print(f"{os.path.relpath(OUT, ROOT)}: {line} in {stats[-1]}")
    found = re.match(r"(\d+) of (\d+) listed Rust functions found", line)
    if not found or int(found.group(2)) == 0:
        sys.exit(f"unreadable statistics: {line!r}")
    share = 100 * int(found.group(1)) / int(found.group(2))
    if minimum is not None and share < minimum:
        sys.exit(f"only {share:.1f} % of the listed functions are in this build (at least "
                 f"{minimum:g} % wanted): regenerate the list (README.md beside this script)")
    print(f"{share:.1f} % found" + (f" (at least {minimum:g} % wanted)" if minimum else ""))
    sys.exit(0)
if shutil.which("valgrind") is None:
    sys.exit("valgrind is missing: apt-get install valgrind")

BIN = os.environ.get("SQUIDBOT_BIN", ROOT + "/target/release/squidbot")
LINK_MAP = os.environ.get("SQUIDBOT_LINK_MAP")
WORK = tempfile.mkdtemp(prefix="squidbot-symbols.")
LLM_URL = instant_llm.start()
PORT = 28790
TOKEN = "symbols-token-0123456789"


def callgrind(tag):
    """The valgrind command line that profiles one run into WORK/<tag>.<pid>."""
    # With a link map, every instruction that ran is named by the function it lies in: in a
    # stripped binary callgrind knows no function boundaries and records only call targets,
    # missing the functions that code reaches by a jump (a tail call).
    instr = "yes" if LINK_MAP else "no"
    return ["valgrind", "--tool=callgrind", "--demangle=no", "--compress-strings=no",
            "--compress-pos=no", f"--dump-instr={instr}", f"--callgrind-out-file={WORK}/{tag}.%p"]


def home(extra=""):
    path = tempfile.mkdtemp(dir=WORK, prefix="home.")
    open(path + "/squidbot.yaml", "w").write(instant_llm.LLM_YAML.format(url=LLM_URL) + extra)
    return path


def gateway_home():
    """A home whose gateway runs as lead.py's does: HTTP API on PORT, heartbeat and cron on."""
    return home("agents:\n  heartbeat:\n    enabled: true\n    interval_minutes: 30\n"
                f"gateway:\n  http:\n    listen: 127.0.0.1:{PORT}\n    token: {TOKEN}\n")


def oneshot():
    h = home()
    env = dict(os.environ, SQUIDBOT_HOME=h, HOME=h)
    for _ in range(2):  # the first run writes the workspace, the second is the usual turn
        subprocess.run(callgrind("oneshot") + [BIN, "agent", "-m", "hello"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def gateway(tag, turns):
    """A gateway configured as scripts/bench/lead.py's (HTTP API, heartbeat and cron on) that
    idles for 10 s (the heartbeat and cron tasks tick, the index warms up), then answers
    `turns` API turns."""
    h = gateway_home()
    env = dict(os.environ, SQUIDBOT_HOME=h, HOME=h)
    gw = subprocess.Popen(callgrind(tag) + [BIN, "gateway"], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    instant_llm.wait_ready(PORT, gw, 120)
    time.sleep(10)
    for i in range(turns):
        req = urllib.request.Request(
            f"http://127.0.0.1:{PORT}/v1/sessions/symbols/messages", method="POST",
            data=json.dumps({"text": f"hello {i}"}).encode(),
            headers={"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN})
        urllib.request.urlopen(req, timeout=120).read()
    gw.send_signal(signal.SIGTERM)
    gw.wait(timeout=120)


def channels(testenv):
    env = dict(os.environ, SQUIDBOT_BENCH_WRAP=" ".join(callgrind("channels")), SQUIDBOT_BIN=BIN)
    subprocess.run([sys.executable, ROOT + "/scripts/bench/channel_latency.py", testenv],
                   env=env, check=True)


def faulted(tag, argv, env, idle_seconds=None):
    """Runs `argv` as it is, not under valgrind, with `perf record -e page-faults -d` into
    WORK/<tag>.faults; after `idle_seconds` a gateway is stopped with SIGTERM.

    Valgrind takes other paths where it does not know a system call: it has no Landlock, so
    under it the shell's sandbox is refused and the functions that build it never run, while
    the real binary runs them at every start (each a 64 KB window of code outside the list).
    A page fault names the function that ran first in its window, so each regeneration finds
    what the one before missed, until the workload faults only inside the list."""
    out = f"{WORK}/{tag}.faults"
    process = subprocess.Popen(["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d",
                                "-o", out] + argv, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if idle_seconds is not None:
        instant_llm.wait_ready(PORT, process, 120)
        time.sleep(idle_seconds)
        for child in open(f"/proc/{process.pid}/task/{process.pid}/children").read().split():
            os.kill(int(child), signal.SIGTERM)
    process.wait(timeout=120)


def fault_functions(path):
    """The functions of BIN that the code page faults recorded in `path` fell in."""
    script = subprocess.run(["perf", "script", "-i", path, "--show-mmap-events", "-F", "addr"],
                            capture_output=True, text=True).stdout
    mapping = None
    for line in script.splitlines():
        if "MMAP" in line and "r-xp" in line and line.rstrip().endswith(BIN):
            found = re.search(r"\[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ 0x([0-9a-f]+)", line)
            mapping = tuple(int(x, 16) for x in found.groups())
    if mapping is None:
        return []
    start, size, offset = mapping
    # The executable segment's file offset and address, to turn a runtime address into the
    # link-time one the link map names.
    segment = next(line.split() for line in subprocess.run(
        ["readelf", "-lW", BIN], capture_output=True, text=True).stdout.splitlines()
        if "LOAD" in line and "R E" in line)
    link = int(segment[2], 16) - int(segment[1], 16) + offset - start
    name_of = namer()
    names = []
    for line in script.splitlines():
        field = line.strip()
        if re.fullmatch(r"[0-9a-f]+", field) and start <= int(field, 16) < start + size:
            names.append(name_of(int(field, 16) + link))
    return [name for name in names if name]


def normalize(names):
    """`names` without what follows Cargo's metadata rather than the code, by the rule of
    scripts/build/startup-order (its `--normalize`), which resolves the list at each link."""
    driver = os.path.join(ROOT, "scripts", "build", "startup-order")
    out = subprocess.run([driver, "--normalize"], input="\n".join(names) + "\n",
                         capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def link_map_functions(path):
    """(start addresses, names) of the input sections of .text in an LLD link map, sorted: with
    one section per function (rustc's and the cc crate's default), the functions."""
    line_re = re.compile(r"^\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s(.*)$")
    sections, in_text = [], False
    for line in open(path, errors="replace"):
        match = line_re.match(line)
        if not match:
            continue
        rest = match.group(3)
        if not rest.startswith(" "):  # an output section
            in_text = rest.strip() == ".text"
        elif in_text and ":(" in rest:
            section = rest.strip().split(":(", 1)[1].rstrip(")")
            name = re.sub(r"^\.text\.((unlikely|hot|startup|exit|split)\.)?", "", section)
            sections.append((int(match.group(1), 16), int(match.group(2), 16), name))
    sections.sort()
    return [start for start, _, _ in sections], sections


@functools.cache
def namer():
    """An address in the binary -> the name of the function it lies in, by the link map."""
    starts, sections = link_map_functions(LINK_MAP)

    def name(address):
        at = bisect.bisect_right(starts, address) - 1
        if at >= 0 and address < sections[at][0] + sections[at][1]:
            return sections[at][2]
        return None
    return name


def ran(profile):
    """The functions of the squidbot binary that ran in one callgrind profile, in the order the
    profile names them."""
    name_of = namer() if LINK_MAP else None
    in_binary = False
    for line in open(profile, errors="replace"):
        if line.startswith("ob="):
            in_binary = line.strip().endswith("/" + os.path.basename(BIN))
        elif not in_binary:
            continue
        elif name_of and line.startswith("0x"):  # an instruction that ran (--dump-instr)
            yield name_of(int(line.split()[0], 16))
        elif not name_of and line.startswith("fn="):
            fn = re.sub(r"'\d+$", "", line[3:].strip())  # no recursion suffix
            yield None if fn.startswith("0x") else fn


def remember_faults():
    """tag -> the functions the real binary faulted code pages in for (`faulted`): this run's,
    then every earlier regeneration's, kept in FAULTS.

    A fault names only the first function run in its 64 KB window. Once a regeneration lists
    those, they lie in the front and a later run faults in others of the same windows, while
    callgrind never sees either (they run only outside valgrind): without what earlier runs
    found, a regeneration dropped them again, and the one-shot's code went back from 5.4 to
    6.1 MiB. A name a later build no longer has costs nothing (the linker skips it); delete
    the file to start over."""
    found = {}
    if os.path.exists(FAULTS):
        for line in open(FAULTS):
            tag, _, name = line.strip().partition(" ")
            if name:
                found.setdefault(tag, []).append(name)
    for tag in ("idle", "oneshot"):
        if os.path.exists(f"{WORK}/{tag}.faults"):
            new = normalize(fault_functions(f"{WORK}/{tag}.faults"))
            found[tag] = list(dict.fromkeys(new + found.get(tag, [])))
    with open(FAULTS, "w") as f:
        f.writelines(f"{tag} {name}\n" for tag in sorted(found) for name in found[tag])
    return found


def symbols():
    """Every function of the squidbot binary that ran in any profile, laid out so that each
    workload's functions are one run of the list: the kernel maps code 64 KB around each page
    that runs, so a workload whose functions lie among another's keeps both resident.

    With I the idle gateway's functions, G the gateway's with turns (I included), O the
    one-shot's and C the channels': O-G, O&G-I, O&I, I-O, G-O-I, then the rest of C. The idle
    gateway runs O&I and I-O, the gateway with turns O&G-I to G-O-I, the one-shot O-G to O&I:
    each a run. (Laid out by workload alone, idle first, a one-shot touched the whole idle
    gateway's code too: 7.4 MB of code resident against its idle gateway's 3-4.) Within a
    class, functions keep the order the profiles first ran them in."""
    runs = remember_faults()
    profiles = [n for n in os.listdir(WORK) if n.split(".")[-1].isdigit()]
    for name in sorted(profiles, key=lambda n: (n.split(".")[0], int(n.split(".")[-1]))):
        tag = name.split(".")[0]
        if tag in ("idle", "gateway", "oneshot", "channels"):
            found = [fn for fn in ran(os.path.join(WORK, name)) if fn]
            runs.setdefault(tag, []).extend(normalize(found))
    idle, turns, oneshot, channels = (set(runs.get(t, [])) for t in
                                      ("idle", "gateway", "oneshot", "channels"))
    gateway = idle | turns
    classes = [
        lambda fn: fn in oneshot and fn not in gateway,
        lambda fn: fn in oneshot and fn in gateway and fn not in idle,
        lambda fn: fn in oneshot and fn in idle,
        lambda fn: fn in idle and fn not in oneshot,
        lambda fn: fn in gateway and fn not in oneshot and fn not in idle,
        lambda fn: fn in channels,
    ]
    first_seen = list(dict.fromkeys(fn for tag in ("idle", "gateway", "oneshot", "channels")
                                    for fn in runs.get(tag, [])))
    # A stable sort: by the first class a function belongs to, then by when it first ran.
    return sorted(first_seen, key=lambda fn: next(
        (index for index, member in enumerate(classes) if member(fn)), len(classes)))


gateway("idle", 0)
gateway("gateway", 3)
oneshot()
if LINK_MAP and shutil.which("perf"):
    h = gateway_home()
    env = dict(os.environ, SQUIDBOT_HOME=h, HOME=h)
    faulted("idle", [BIN, "gateway"], env, idle_seconds=10)
    h = home()
    env = dict(os.environ, SQUIDBOT_HOME=h, HOME=h)
    subprocess.run([BIN, "agent", "-m", "hello"], env=env, stdout=subprocess.DEVNULL)
    faulted("oneshot", [BIN, "agent", "-m", "hello"], env)
if len(sys.argv) > 1:
    channels(sys.argv[1])
names = symbols()
os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as f:
    f.write("\n".join(names) + "\n")
print(f"{len(names)} functions written to {os.path.relpath(OUT, ROOT)} (profiles in {WORK})")
