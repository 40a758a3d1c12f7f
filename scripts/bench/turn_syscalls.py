# Counts the system calls one HTTP turn of the gateway makes (issue #26 asks that a turn make
# none it does not need): the gateway runs under `strace -f -c` against instant_llm.py, is
# warmed with WARM turns, then TURNS more are sent on one session; the per-turn counts are the
# difference between two strace summaries (WARM turns, WARM + TURNS turns) divided by TURNS,
# so start-up and shutdown cancel out.
#
#   cargo build --release           (or SQUIDBOT_BIN=target/debug/squidbot: same calls)
#   python3 scripts/bench/turn_syscalls.py [TURNS]
import json, os, re, signal, socket, subprocess, sys, tempfile, time, urllib.request
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instant_llm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SQUIDBOT_BIN", ROOT + "/target/release/squidbot")
TURNS = int(sys.argv[1]) if len(sys.argv) > 1 else 100
WARM = 5
TOKEN = "bench-token-turn-syscalls"
LLM_URL = instant_llm.start()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def say(port, text):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/sessions/bench/messages",
        data=json.dumps({"text": text}).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=30).read()


def summary(turns):
    """strace -c's table for a gateway that answered `turns` turns: {syscall: (calls, errors)}."""
    home = tempfile.mkdtemp(prefix="squidbot-syscalls.")
    port = free_port()
    config = instant_llm.LLM_YAML.format(url=LLM_URL) + (
        "agents:\n  heartbeat:\n    enabled: false\n"
        f"gateway:\n  http:\n    listen: 127.0.0.1:{port}\n    token: {TOKEN}\n"
    )
    open(home + "/squidbot.yaml", "w").write(config)
    out = home + "/strace.txt"
    env = dict(os.environ, SQUIDBOT_HOME=home, HOME=home)
    env.pop("SQUIDBOT_CONFIG", None)
    process = subprocess.Popen(["strace", "-f", "-c", "-o", out, BIN, "gateway"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    instant_llm.wait_ready(port, process)
    # A daemon's workspace was last changed long before its turns; a fresh one (templates
    # written at start) is rescanned until it settled (storage/workspace_files.rs, 2 s).
    time.sleep(2.5)
    for i in range(turns):
        say(port, f"turn {i}")
    # SIGTERM to the gateway itself (strace would only detach): it drains and exits.
    children = open(f"/proc/{process.pid}/task/{process.pid}/children").read().split()
    for child in children:
        os.kill(int(child), signal.SIGTERM)
    process.wait(timeout=60)
    table = {}
    for line in open(out):
        fields = line.split()
        if len(fields) >= 5 and re.match(r"^[0-9.]+$", fields[0]) and fields[-1] != "total":
            calls = int(fields[3])
            errors = int(fields[4]) if len(fields) == 6 else 0
            table[fields[-1]] = (calls, errors)
    return table


base = summary(WARM)
full = summary(WARM + TURNS)
print(f"per turn, over {TURNS} turns after {WARM} warm ones ({BIN}):")
rows = []
for name in sorted(set(base) | set(full)):
    calls = (full.get(name, (0, 0))[0] - base.get(name, (0, 0))[0]) / TURNS
    errors = (full.get(name, (0, 0))[1] - base.get(name, (0, 0))[1]) / TURNS
    if calls >= 0.5:
        rows.append((calls, name, errors))
for calls, name, errors in sorted(rows, reverse=True):
    print(f"  {name:<20} {calls:6.1f}" + (f"  ({errors:.1f} failing)" if errors >= 0.5 else ""))
