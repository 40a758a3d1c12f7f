# CPU per HTTP turn of the gateway and turn latency, without valgrind: the release gateway
# (HTTP only) against instant_llm.py, 60 warm-up turns in one session, then 400 more; the
# gateway's utime+stime from /proc over those 400, and their p50/p95 wall time.
#
#   python3 scripts/bench/cpu_per_turn.py BINARY PORT
#
# Run it alternately on two binaries (a baseline and the current tree) to compare them.
import json, os, signal, subprocess, sys, tempfile, time, urllib.request, statistics
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instant_llm
BIN = sys.argv[1]; PORT = int(sys.argv[2]); TOKEN = "cpu-turn-token-0123456789"
home = tempfile.mkdtemp(prefix="squidbot-cpu.")
with open(home + "/squidbot.yaml", "w") as f:
    f.write(instant_llm.LLM_YAML.format(url=instant_llm.start()))
    f.write(f"gateway:\n  http:\n    listen: 127.0.0.1:{PORT}\n    token: {TOKEN}\n")
g = subprocess.Popen([BIN, "gateway"], env=dict(os.environ, SQUIDBOT_HOME=home, HOME=home),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def turn(i):
    r = urllib.request.Request(f"http://127.0.0.1:{PORT}/v1/sessions/bench/messages", method="POST",
        data=json.dumps({"text": f"hello {i}"}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN})
    urllib.request.urlopen(r, timeout=60).read()
def cpu():
    f = open(f"/proc/{g.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
instant_llm.wait_ready(PORT, g)
for i in range(60): turn(i)
c0 = cpu(); lat = []
for i in range(400):
    t = time.perf_counter(); turn(60 + i); lat.append(time.perf_counter() - t)
c1 = cpu()
lat.sort()
print(f"{os.path.basename(BIN)}: CPU per turn {(c1 - c0) / 400 * 1000:.2f} ms, p50 {lat[200]*1000:.2f} ms, p95 {lat[380]*1000:.2f} ms")
g.send_signal(signal.SIGTERM); g.wait(timeout=30)
