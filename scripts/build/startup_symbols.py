# Regenerates build/startup-symbols.txt: the functions of the squidbot binary that run while it
# starts, idles and answers, which build.rs hands to the linker (`--symbol-ordering-file`) so
# they sit together at the front of .text. The kernel maps code in 64 KB at a time around each
# page that runs; with these functions spread over 38 MB of code, an idle gateway kept ~15 MB of
# it resident. Clustered, a few MB cover them.
#
#   CARGO_PROFILE_RELEASE_STRIP=none cargo build --release
#   python3 scripts/build/startup_symbols.py [TESTENV_DIR]
#   cargo build --release     # relinks with the new order
#
# The release profile strips symbols, and callgrind names functions by them: profile a build
# with stripping off (the same code and names; stripping happens after the link).
#
# Profile the binary of `cargo build --release` itself (or SQUIDBOT_BIN): `cargo bench` leaves
# its own build at target/release/squidbot, with dev-dependency features and so other names.
#
# Needs valgrind (callgrind records every function that ran, by its mangled name). Workloads,
# each against the instant LLM of scripts/bench/instant_llm.py: a one-shot `agent -m`; an
# HTTP-only gateway that starts, answers three API turns and shuts down; and, with the test
# servers of scripts/testenv/up (TESTENV_DIR), scripts/bench/channel_latency.py, whose gateway
# runs Matrix and email. Names that a later build no longer has are skipped by the linker; a
# stale list costs memory, never correctness. Regenerate after dependency upgrades.
import json, os, re, shutil, signal, subprocess, sys, tempfile, time, urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import instant_llm

if shutil.which("valgrind") is None:
    sys.exit("valgrind is missing: apt-get install valgrind")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SQUIDBOT_BIN", ROOT + "/target/release/squidbot")
OUT = ROOT + "/build/startup-symbols.txt"
WORK = tempfile.mkdtemp(prefix="squidbot-symbols.")
LLM_URL = instant_llm.start()
PORT = 28790
TOKEN = "symbols-token-0123456789"


def callgrind(tag):
    """The valgrind command line that profiles one run into WORK/<tag>.<pid>."""
    return ["valgrind", "--tool=callgrind", "--demangle=no", "--compress-strings=no",
            "--compress-pos=no", "--dump-instr=no", f"--callgrind-out-file={WORK}/{tag}.%p"]


def home(extra=""):
    path = tempfile.mkdtemp(dir=WORK, prefix="home.")
    open(path + "/squidbot.yaml", "w").write(instant_llm.LLM_YAML.format(url=LLM_URL) + extra)
    return path


def oneshot():
    h = home()
    env = dict(os.environ, SQUIDBOT_HOME=h, HOME=h)
    for _ in range(2):  # the first run writes the workspace, the second is the usual turn
        subprocess.run(callgrind("oneshot") + [BIN, "agent", "-m", "hello"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def gateway():
    h = home(f"gateway:\n  http:\n    listen: 127.0.0.1:{PORT}\n    token: {TOKEN}\n")
    env = dict(os.environ, SQUIDBOT_HOME=h, HOME=h)
    gw = subprocess.Popen(callgrind("gateway") + [BIN, "gateway"], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    instant_llm.wait_ready(PORT, gw, 120)
    time.sleep(3)  # idle: the heartbeat and cron tasks tick, the index warms up
    for i in range(3):
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


def symbols():
    """Every function of the squidbot binary that ran in any profile, in workload order."""
    seen, order = set(), []
    # Workload order: what every process runs first, then the HTTP-only gateway, then the
    # channels, so a gateway without Matrix and email touches only the front of the list.
    rank = {"oneshot": 0, "gateway": 1, "channels": 2}
    profiles = [n for n in os.listdir(WORK) if n.split(".")[0] in rank]
    for name in sorted(profiles, key=lambda n: (rank[n.split(".")[0]], int(n.split(".")[1]))):
        in_binary = False
        for line in open(os.path.join(WORK, name), errors="replace"):
            if line.startswith("ob="):
                in_binary = line.strip().endswith("/" + os.path.basename(BIN))
            elif line.startswith("fn=") and in_binary:
                fn = line[3:].strip()
                fn = re.sub(r"'\d+$", "", fn)  # callgrind's suffix for recursion levels
                if fn and fn not in seen and not fn.startswith("0x"):
                    seen.add(fn)
                    order.append(fn)
    return order


oneshot()
gateway()
if len(sys.argv) > 1:
    channels(sys.argv[1])
names = symbols()
os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as f:
    f.write("\n".join(names) + "\n")
print(f"{len(names)} functions written to {os.path.relpath(OUT, ROOT)} (profiles in {WORK})")
