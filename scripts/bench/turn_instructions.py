# Instructions per turn: the gateway's own CPU work for one API turn, counted by callgrind, so
# that a change on the turn's path can be measured on a busy two-core machine where wall-clock
# throughput (gateway_load) moves ±15 % from run to run. Instruction counts do not depend on what
# else runs.
#
#   CARGO_PROFILE_RELEASE_STRIP=none cargo build --release   (callgrind needs the symbols)
#   python3 scripts/bench/turn_instructions.py [TURNS]     # default 300
#
# The release gateway (or SQUIDBOT_BIN) runs HTTP-only under `valgrind --tool=callgrind` against
# the instant LLM of instant_llm.py. After 60 warm-up turns in one session (so its unconsolidated
# tail is as long as the defaults let it grow), the counters are zeroed, TURNS more turns are
# sent one after another, and the counters dumped: start-up and shutdown are not counted. Prints
# instructions per turn and the inclusive share of the functions named in WATCH.
import json, os, re, shutil, signal, subprocess, sys, tempfile, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instant_llm

for tool in ("valgrind", "callgrind_control", "callgrind_annotate"):
    if shutil.which(tool) is None:
        sys.exit(f"{tool} is missing: apt-get install valgrind")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SQUIDBOT_BIN", ROOT + "/target/release/squidbot")
TURNS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
WARMUP = 60
PORT = 28791
TOKEN = "turn-instructions-token-0123"
# Inclusive costs worth following: copying messages, and serializing the LLM request.
WATCH = {
    "Message::clone": r"<squidbot::core::message::Message as core::clone::Clone>::clone",
    "Tail::clone": r"<squidbot::core::ports::store::Tail as core::clone::Clone>::clone",
    "request serialization": r"reqwest::async_impl::request::RequestBuilder::json",
}

work = tempfile.mkdtemp(prefix="squidbot-turn-ir.")
home = os.path.join(work, "home")
os.makedirs(home)
with open(home + "/squidbot.yaml", "w") as f:
    f.write(instant_llm.LLM_YAML.format(url=instant_llm.start()))
    f.write(f"gateway:\n  http:\n    listen: 127.0.0.1:{PORT}\n    token: {TOKEN}\n")
out = os.path.join(work, "callgrind.out")
gateway = subprocess.Popen(
    ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", BIN, "gateway"],
    env=dict(os.environ, SQUIDBOT_HOME=home, HOME=home),
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def turn(i):
    request = urllib.request.Request(
        f"http://127.0.0.1:{PORT}/v1/sessions/bench/messages", method="POST",
        data=json.dumps({"text": f"hello {i}"}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN})
    urllib.request.urlopen(request, timeout=120).read()


instant_llm.wait_ready(PORT, gateway)
for i in range(WARMUP):
    turn(i)
subprocess.run(["callgrind_control", "-z", str(gateway.pid)], check=True,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for i in range(TURNS):
    turn(WARMUP + i)
subprocess.run(["callgrind_control", "-d", "turns", str(gateway.pid)], check=True,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
gateway.send_signal(signal.SIGTERM)
gateway.wait(timeout=180)

dumps = sorted(n for n in os.listdir(work) if n.startswith("callgrind.out") and n != "callgrind.out")
dump = os.path.join(work, dumps[0]) if dumps else sys.exit(f"no callgrind dump in {work}")
annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", dump],
                           check=True, capture_output=True, text=True).stdout
total = None
for line in open(dump, errors="replace"):
    if line.startswith(("summary:", "totals:")):
        total = int(line.split()[1])
if not total:
    sys.exit(f"no totals in {dump}")
print(f"{TURNS} turns after {WARMUP} warm-up turns: {total / TURNS:,.0f} instructions per turn")
for label, pattern in WATCH.items():
    inclusive = 0
    for line in annotated.splitlines():
        match = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+\S*?:(.*)", line)
        if match and re.search(re.escape(pattern), match.group(2)):
            inclusive = max(inclusive, int(match.group(1).replace(",", "")))
    print(f"  {label}: {inclusive / total:.1%} inclusive ({inclusive / TURNS:,.0f} per turn)")
print(f"(profile in {dump})")
