# Idle RSS of the gateway with and without search_history, on an empty home and on one whose
# 10 000-message session the history index must index at start (its warm-up):
#
#   cargo build --release
#   python3 scripts/bench/idle_rss.py [ROUNDS]
#
# Each run starts `squidbot gateway` (HTTP API only, heartbeat off) on a fresh home, waits for
# /readyz and 5 s more, and reads VmRSS, RssAnon and RssFile from /proc. Min / median / max of
# ROUNDS runs (default 3).
import os, shutil, statistics, subprocess, sys, tempfile, time, urllib.request
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instant_llm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SQUIDBOT_BIN", ROOT + "/target/release/squidbot")
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
LLM_URL = instant_llm.start()
PORT = 18765


def run(search, history):
    home = tempfile.mkdtemp(prefix="squidbot-rss.")
    config = instant_llm.LLM_YAML.format(url=LLM_URL) + f"""agents:
  heartbeat:
    enabled: false
tools:
  search_history:
    enabled: {str(search).lower()}
gateway:
  http:
    listen: 127.0.0.1:{PORT}
    token: idle-rss-bench-token
"""
    open(home + "/squidbot.yaml", "w").write(config)
    if history:
        instant_llm.write_history(home, history, "the garden and the weather")
    env = dict(os.environ, SQUIDBOT_HOME=home, HOME=home)
    gateway = subprocess.Popen([BIN, "gateway"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(400):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{PORT}/readyz", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        time.sleep(5)
        status = {line.split(":")[0]: int(line.split()[1]) / 1024
                  for line in open(f"/proc/{gateway.pid}/status")
                  if line.startswith(("VmRSS", "RssAnon", "RssFile"))}
    finally:
        gateway.terminate()
        gateway.wait()
        shutil.rmtree(home)
    return status


if not os.access(BIN, os.X_OK):
    sys.exit(f"{BIN} is missing: cargo build --release (or set SQUIDBOT_BIN)")
for history in (0, 10_000):
    for search in (False, True):
        runs = [run(search, history) for _ in range(ROUNDS)]
        cells = []
        for key in ("VmRSS", "RssAnon", "RssFile"):
            values = sorted(r[key] for r in runs)
            cells.append(f"{key} {values[0]:.1f}/{statistics.median(values):.1f}/{values[-1]:.1f}")
        print(f"history {history:>6}, search_history {'on ' if search else 'off'}: " + ", ".join(cells) + " MiB")
