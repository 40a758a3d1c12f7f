# How much of each request a provider's prefix cache could reuse, over a scripted day of one
# session with memory writes and consolidations (#36): the gateway (HTTP only, heartbeat off)
# against instant_llm.py scripted to call `memory_write` every REMEMBER_EVERY turns; each
# agent request is laid out as a provider's cache sees it (the tools, then the messages, in
# request order) and compared with the earlier requests of the last WINDOW: the longest shared
# prefix over its length is what a cache can serve. Prints the mean over all turns, the first
# turn after each memory_write and after each consolidation, and the size of a fresh turn's
# request (tools + messages, JSON characters).
#
#   python3 scripts/bench/cache_reuse.py [BINARY] [PORT]
#
# BINARY defaults to target/release/squidbot (any build: the layout does not depend on it).
import json, os, signal, subprocess, sys, tempfile, threading, urllib.request
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instant_llm

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/squidbot"
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 18790
TOKEN = "cache-reuse-token-0123456789"
TURNS, REMEMBER_EVERY, WINDOW = 150, 12, 20
THRESHOLD, KEEP = 60, 20

requests, lock, facts = [], threading.Lock(), []


def reply(request):
    """A memory_write for a REMEMBER message, a plain answer otherwise; summaries get text."""
    with lock:
        requests.append(request)
    messages = request.get("messages", [])
    last = messages[-1] if messages else {}
    if "tools" not in request:
        return {"content": "The owner talked about the day's plans and facts."}, "stop"
    text = last.get("content") if last.get("role") == "user" else None
    if isinstance(text, str) and text.startswith("REMEMBER"):
        facts.append(text.split(" ", 1)[1])
        content = "\n".join(f"- {f}" for f in facts)
        call = {"index": 0, "id": f"call{len(facts)}", "type": "function",
                "function": {"name": "memory_write", "arguments": json.dumps({"content": content})}}
        return {"tool_calls": [call]}, "tool_calls"
    return {"content": "Noted; anything else?"}, "stop"


def provider_view(request):
    """The request as a prefix cache sees it: tools first, then each message in order."""
    return json.dumps(request.get("tools", []), sort_keys=True) + "".join(
        json.dumps(m, sort_keys=True) for m in request["messages"])


def shared_prefix(a, b):
    """Length of the longest common prefix of `a` and `b` (binary search on slices)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


home = tempfile.mkdtemp(prefix="squidbot-cache.")
with open(home + "/squidbot.yaml", "w") as f:
    f.write(instant_llm.LLM_YAML.format(url=instant_llm.start(reply)))
    f.write(f"agents:\n  consolidation_threshold: {THRESHOLD}\n  keep_recent: {KEEP}\n"
            f"  heartbeat:\n    enabled: false\n"
            f"gateway:\n  http:\n    listen: 127.0.0.1:{PORT}\n    token: {TOKEN}\n")
g = subprocess.Popen([BIN, "gateway"], env=dict(os.environ, SQUIDBOT_HOME=home, HOME=home),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    instant_llm.wait_ready(PORT, g)
    turn_kinds = []  # per turn: (index of its first request, what came before it)
    before = "start"
    for i in range(TURNS):
        remember = i % REMEMBER_EVERY == REMEMBER_EVERY - 1
        text = f"REMEMBER fact number {i} of the day" if remember else f"message {i}: how is it going?"
        with lock:
            first = len(requests)
            summaries = sum(1 for r in requests if "tools" not in r)
        req = urllib.request.Request(
            f"http://127.0.0.1:{PORT}/v1/sessions/day/messages", method="POST",
            data=json.dumps({"text": text}).encode(),
            headers={"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN})
        urllib.request.urlopen(req, timeout=60).read()
        with lock:
            turn_requests = [j for j in range(first, len(requests)) if "tools" in requests[j]]
            consolidated = sum(1 for r in requests if "tools" not in r) > summaries
        # A consolidation runs after the turn's reply: the next turn is the first after it.
        turn_kinds.append((turn_requests[0], before))
        before = "consolidation" if consolidated else ("memory_write" if remember else "turn")
finally:
    g.send_signal(signal.SIGTERM)
    g.wait(timeout=30)

views = [provider_view(r) if "tools" in r else None for r in requests]
shares = {}
for index, kind in turn_kinds:
    earlier = [v for v in views[max(0, index - WINDOW):index] if v is not None]
    if not earlier:
        continue
    view = views[index]
    share = max(shared_prefix(view, e) for e in earlier) / len(view)
    shares.setdefault(kind, []).append(share)
    shares.setdefault("all", []).append(share)
DEBUG = os.environ.get("DEBUG")
if DEBUG:
    for index, kind in turn_kinds:
        earlier = [v for v in views[max(0, index - WINDOW):index] if v is not None]
        if earlier:
            print(index, kind, round(max(shared_prefix(views[index], e) for e in earlier) / len(views[index]), 3), len(views[index]))
mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
fresh = views[turn_kinds[0][0]]
print(f"{TURNS} turns, a memory_write every {REMEMBER_EVERY}, consolidation at {THRESHOLD} "
      f"(keep {KEEP}): {sum(1 for v in views if v is None)} consolidation calls")
for kind in ["all", "turn", "memory_write", "consolidation"]:
    xs = shares.get(kind, [])
    low = min(xs) if xs else float("nan")
    print(f"  after {kind:13s}: mean share {mean(xs):.3f}, lowest {low:.3f} ({len(xs)} turns)")
print(f"  fresh turn's request: {len(fresh)} JSON characters "
      f"({len(json.dumps(requests[turn_kinds[0][0]].get('tools', [])))} of them tools)")
