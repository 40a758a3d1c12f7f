# The lead guard (#26): the current tree against a baseline commit, measured interleaved in one
# run on this machine, so a regression on a hot path shows as a ratio instead of going unnoticed.
#
#   python3 scripts/bench/lead.py [--baseline REV] [--rounds N] [--features ARGS]
#   python3 scripts/bench/lead.py --head-bin PATH --base-bin PATH   # skip the builds
#
# Builds the working tree and REV (default: the commit BENCHMARKS.md names as the baseline,
# 0fb7ee0) with `cargo build --release --locked` into separate target directories under
# $LEAD_DIR (default /tmp/squidbot-lead; REV is checked out there as a git worktree), then, for
# ROUNDS rounds (default 3), in alternating order (base first on even rounds, head first on odd):
#
# - ready: spawn of `squidbot gateway` to the first 200 from /readyz (HTTP API, heartbeat and
#   cron on, as an owner runs it; no Matrix or email, which need servers);
# - idle RSS (VmRSS) 10 s and 60 s after ready: both gateways idle side by side;
# - one-shot `squidbot agent -m hello`: wall time (spawn to exit) and peak RSS (GNU time);
# - HTTP turns: 30 warm-up turns in one session, then 200 timed: p50/p95 wall and the
#   gateway's CPU (utime + stime from /proc) per turn;
# - prompt: the bytes of the last chat request the LLM received, and its message count.
#
# Every LLM call goes to instant_llm.py, which answers "ok" at once. Prints one table of
# medians over the rounds with head/base ratios. Not a test: numbers depend on the machine.
import argparse, json, os, shutil, signal, statistics, subprocess, sys, tempfile, threading
import time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instant_llm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIME = "/usr/bin/time"
TOKEN = "lead-bench-token-0123456789"

LAST_REQUEST = {}


def recording(request):
    """instant_llm's reply, keeping the request the LLM received last (for the prompt size)."""
    LAST_REQUEST["body"] = json.dumps(request)
    LAST_REQUEST["messages"] = len(request.get("messages", []))
    return {"content": "ok"}, "stop"


LLM_URL = instant_llm.start(recording)


def build(tree, target, features):
    """`cargo build --release` of `tree` into `target`; the binary's path."""
    print(f"building {tree} into {target} ...", flush=True)
    started = time.time()
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    subprocess.run(["cargo", "build", "--release", "--locked", *features], cwd=tree, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    print(f"  built in {time.time() - started:.0f} s", flush=True)
    return os.path.join(target, "release", "squidbot")


def worktree(rev, path):
    """A checkout of `rev` at `path` (a git worktree, made once and moved to `rev` after)."""
    if not os.path.isdir(path):
        subprocess.run(["git", "worktree", "add", "--detach", path, rev], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    else:
        subprocess.run(["git", "checkout", "--detach", "--quiet", rev], cwd=path, check=True)
    return path


def home_for(port):
    """A fresh home whose gateway serves HTTP on `port`, with heartbeat and cron on."""
    home = tempfile.mkdtemp(prefix="squidbot-lead.")
    with open(home + "/squidbot.yaml", "w") as f:
        f.write(instant_llm.LLM_YAML.format(url=LLM_URL))
        f.write("agents:\n  heartbeat:\n    enabled: true\n    interval_minutes: 30\n")
        f.write(f"gateway:\n  http:\n    listen: 127.0.0.1:{port}\n    token: {TOKEN}\n")
    return home


class Gateway:
    """`squidbot gateway` of `binary` on a fresh home, serving HTTP on `port`."""

    def __init__(self, binary, port):
        self.port, self.home = port, home_for(port)
        env = dict(os.environ, SQUIDBOT_HOME=self.home, HOME=self.home)
        env.pop("SQUIDBOT_CONFIG", None)
        started = time.perf_counter()
        self.process = subprocess.Popen([binary, "gateway"], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1)
                break
            except OSError:
                if self.process.poll() is not None or time.perf_counter() - started > 60:
                    sys.exit(f"{binary}: the gateway never became ready")
                time.sleep(0.001)
        self.ready_ms = (time.perf_counter() - started) * 1000

    def rss_mib(self):
        for line in open(f"/proc/{self.process.pid}/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_s(self):
        fields = open(f"/proc/{self.process.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def turn(self, text):
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/sessions/lead/messages", method="POST",
            data=json.dumps({"text": text}).encode(),
            headers={"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN})
        urllib.request.urlopen(request, timeout=60).read()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)
        shutil.rmtree(self.home, ignore_errors=True)


def idle(binaries, results):
    """Both gateways started one after the other (each one's ready time alone), then idle side
    by side; VmRSS 10 s and 60 s after the last was ready."""
    gateways = {}
    for offset, (name, binary) in enumerate(binaries):
        gateways[name] = Gateway(binary, 18900 + offset)
        results[name]["ready ms"].append(gateways[name].ready_ms)
    time.sleep(10)
    for name, gateway in gateways.items():
        results[name]["idle RSS 10 s MiB"].append(gateway.rss_mib())
    time.sleep(50)
    for name, gateway in gateways.items():
        results[name]["idle RSS 60 s MiB"].append(gateway.rss_mib())
        gateway.stop()


def oneshot(name, binary, results, runs=10):
    """`agent -m hello` `runs` times on one home (after a first run that sets the home up)."""
    home = home_for(18950)
    env = dict(os.environ, SQUIDBOT_HOME=home, HOME=home)
    env.pop("SQUIDBOT_CONFIG", None)
    argv = [binary, "agent", "-m", "hello"]
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    walls, peaks = [], []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        walls.append((time.perf_counter() - started) * 1000)
        # GNU time's own small process spawns squidbot: a child of this Python process would
        # inherit Python's peak RSS across exec.
        with tempfile.NamedTemporaryFile("r") as out:
            subprocess.run([TIME, "-f", "%M", "-o", out.name, *argv], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            peaks.append(int(out.read().split()[-1]) / 1024)
    shutil.rmtree(home, ignore_errors=True)
    results[name]["one-shot wall ms"].append(statistics.median(walls))
    results[name]["one-shot peak RSS MiB"].append(statistics.median(peaks))


def turns(name, binary, results, warm=30, timed=200):
    gateway = Gateway(binary, 18960)
    try:
        for i in range(warm):
            gateway.turn(f"hello {i}")
        before, latencies = gateway.cpu_s(), []
        for i in range(timed):
            started = time.perf_counter()
            gateway.turn(f"hello {warm + i}")
            latencies.append((time.perf_counter() - started) * 1000)
        cpu = gateway.cpu_s() - before
    finally:
        gateway.stop()
    latencies.sort()
    results[name]["turn p50 ms"].append(latencies[len(latencies) // 2])
    results[name]["turn p95 ms"].append(latencies[int(len(latencies) * 0.95)])
    results[name]["turn CPU ms"].append(cpu / timed * 1000)
    results[name]["prompt bytes"].append(len(LAST_REQUEST.get("body", "")))
    results[name]["prompt messages"].append(LAST_REQUEST.get("messages", 0))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", default="0fb7ee0")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--features", default="", help="cargo feature flags for both builds")
    parser.add_argument("--head-bin")
    parser.add_argument("--base-bin")
    args = parser.parse_args()
    if not os.access(TIME, os.X_OK):
        sys.exit(f"{TIME} is missing: apt-get install time")
    lead_dir = os.environ.get("LEAD_DIR", "/tmp/squidbot-lead")
    features = args.features.split()
    base = args.base_bin or build(worktree(args.baseline, lead_dir + "/base-tree"),
                                  lead_dir + "/target-base", features)
    head = args.head_bin or build(ROOT, lead_dir + "/target-head", features)
    binaries = {"base": base, "head": head}
    for name, binary in binaries.items():
        print(f"{name}: {binary} ({os.path.getsize(binary) / 1e6:.1f} MB)")
    results = {name: {} for name in binaries}
    for name in binaries:
        for measure in ("ready ms", "idle RSS 10 s MiB", "idle RSS 60 s MiB", "one-shot wall ms",
                        "one-shot peak RSS MiB", "turn p50 ms", "turn p95 ms", "turn CPU ms",
                        "prompt bytes", "prompt messages"):
            results[name][measure] = []
    for round_ in range(args.rounds):
        order = list(binaries.items())
        if round_ % 2:
            order.reverse()
        print(f"round {round_ + 1}/{args.rounds}: {' then '.join(n for n, _ in order)}",
              flush=True)
        idle(order, results)
        for name, binary in order:
            oneshot(name, binary, results)
        for name, binary in order:
            turns(name, binary, results)
    print(f"\nmedians of {args.rounds} rounds\n")
    print(f"| measure | base | head | head/base |\n|---|---|---|---|")
    # Two decimals below 10, where the targets sit (0.6 ms of CPU, 1.5 ms p50).
    shown = lambda value: f"{value:.2f}" if value < 10 else f"{value:.1f}"
    for measure in results["head"]:
        b = statistics.median(results["base"][measure])
        h = statistics.median(results["head"][measure])
        ratio = f"{h / b:.2f}" if b else "-"
        print(f"| {measure} | {shown(b)} | {shown(h)} | {ratio} |")
    print("\nper round (base / head):")
    for measure in results["head"]:
        rounds = zip(results["base"][measure], results["head"][measure])
        print(f"  {measure}: " + ", ".join(f"{shown(b)} / {shown(h)}" for b, h in rounds))


if __name__ == "__main__":
    main()
