# Measures the one-shot turn `squidbot agent -m TEXT` (TARGETS.md: wall <= 10 ms, peak RSS
# <= 10 MiB): the release binary is started ROUNDS times on one home, against the
# OpenAI-compatible server of instant_llm.py, which answers "ok" at once.
# Each run is a full turn: config load, agent assembly (15 tools, skills, history index open),
# the durable append of the message and the reply, and the streamed LLM call.
#
#   cargo build --release
#   python3 scripts/bench/oneshot.py [ROUNDS]
#
# Wall time is measured around spawn and wait; peak RSS in separate runs under GNU time, whose
# own small process spawns squidbot (see peak_mib for why not this script's wait4).
# Two homes: a fresh one (the first run writes the workspace templates and bundled skills, the
# rest reuse them) and one whose cli:local session already holds 10 000 messages.
import os, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instant_llm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SQUIDBOT_BIN", ROOT + "/target/release/squidbot")
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
TIME = "/usr/bin/time"  # GNU time (Debian package `time`), for the peak RSS
if not os.access(TIME, os.X_OK):
    sys.exit(f"{TIME} is missing: apt-get install time")
LLM_URL = instant_llm.start()


def make_home(history):
    home = tempfile.mkdtemp(prefix="squidbot-oneshot.")
    open(home + "/squidbot.yaml", "w").write(instant_llm.LLM_YAML.format(url=LLM_URL))
    if history:
        instant_llm.write_history(home, history, "the garden")
    return home


def run(home, prefix):
    """Runs `squidbot agent -m hello` behind `prefix`; returns (wall seconds, exit code)."""
    env = dict(os.environ, SQUIDBOT_HOME=home, HOME=home)
    env.pop("SQUIDBOT_CONFIG", None)
    started = time.perf_counter()
    argv = prefix + [BIN, "agent", "-m", "hello"]
    pid = os.posix_spawn(argv[0], argv, env,
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)])
    _, status, _ = os.wait4(pid, 0)
    return time.perf_counter() - started, os.waitstatus_to_exitcode(status)


def peak_mib(home):
    """The turn's peak RSS, as GNU time reports it for its own child.

    Not this script's wait4: a child spawned from Python inherits Python's peak (the kernel
    carries the old address space's high-water mark across exec), which alone is ~10-20 MiB.
    """
    with tempfile.NamedTemporaryFile("r") as out:
        _, code = run(home, [TIME, "-f", "%M", "-o", out.name])
        if code != 0:
            sys.exit(f"run under {TIME} failed with {code}")
        return int(out.read().split()[-1]) / 1024


def measure(label, history):
    home = make_home(history)
    walls, peaks = [], []
    for i in range(ROUNDS + 1):
        wall, code = run(home, [])
        if code != 0:
            sys.exit(f"{label}: run {i} failed with exit code {code}")
        peak = peak_mib(home)
        if i == 0:
            first = (wall, peak)
            continue
        walls.append(wall * 1000)
        peaks.append(peak)
    walls.sort()
    print(f"{label}: first run {first[0] * 1000:.1f} ms; next {ROUNDS}: "
          f"wall median {statistics.median(walls):.1f} ms, p90 {walls[int(len(walls) * 0.9) - 1]:.1f} ms, "
          f"min {walls[0]:.1f} ms; peak RSS median {statistics.median(peaks):.1f} MiB, "
          f"max {max(peaks):.1f} MiB")


print(f"binary: {BIN} ({os.path.getsize(BIN) / 1e6:.0f} MB)")
measure("fresh home", 0)
measure("10 000-message session", 10_000)
