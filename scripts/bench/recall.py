# Recall of `search_history` on LoCoMo (Maharana et al., ACL 2024): does the agent's own search
# show the evidence of a question about a long conversation among its first results?
#
#   cargo build --release            # or SQUIDBOT_BIN=target/debug/squidbot
#   python3 scripts/bench/recall.py [DATA]   # DATA defaults to ../shared/data/locomo-dev.json
#
# The data is CC BY-NC 4.0: it is read from where it lies and never copied into this repository.
#
# For each conversation, in a fresh home:
# 1. Its sessions are written as an original (Python) squidbot history.jsonl, one user record
#    per turn of the session's first speaker and one assistant record per turn of the other,
#    channel `locomo`, sender `<sample>-s<N>` (so each LoCoMo session becomes the squidbot
#    session `locomo:<sample>-s<N>`), each turn's text as "<speaker>: <text>" (plus
#    " [shared an image: <caption>]" when the turn shared one), stamped with the session's date
#    and 30 s per turn. `squidbot import` brings it in.
# 2. Every question of categories 1-4 with evidence is asked with `squidbot agent -m QUESTION`
#    against a scripted OpenAI-compatible server on loopback, which answers the first call with
#    a `search_history` tool call ({"query": ..., "max_results": 10}) and the second with
#    "done", keeping the tool's result. After each question the cli:local session is removed,
#    so every question is asked in the same home. Twice: the query is the raw question, then
#    its keywords (the question less function words, as a model tends to write them).
# 3. The returned entries are parsed ("[N] … · session S · role" and their `match` line), each
#    mapped back to its LoCoMo turn by session and text. Recall@k = the share of a question's
#    evidence turns among the first k entries, averaged over the questions (evidence ids split
#    on ';'; questions without evidence are skipped). An entry from cli:local (the question
#    itself) would be a miss; their number is printed and must be 0.
#    The output of squidbot before 2026-11-25 ("## Match N — [session] | date" and a
#    "**ROLE: text**" line, cut at 300 characters) is read too, for before/after figures.
# 4. A baseline in the same run: plain Okapi BM25 (k1 = 1.2, b = 0.75, lower-cased words, no
#    stemming, no stop words) over the same turn texts with the raw question.
import collections, datetime, json, math, os, re, shutil, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instant_llm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SQUIDBOT_BIN", ROOT + "/target/release/squidbot")
DATA = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "data", "locomo-dev.json")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

# Words a model leaves out when it turns a question into search keywords.
FUNCTION_WORDS = set("""a an the and or but of to in on at for with from by about as into
is are was were be been being do does did have has had will would can could should may might
what when where which who whom whose why how that this these those it its there their they
them he she his her him i me my you your we our us any some ever""".split())


def keywords(question):
    words = re.findall(r"[\w'-]+", question)
    kept = [w for w in words if w.lower() not in FUNCTION_WORDS]
    return " ".join(kept) or question


# --- the conversation as an original squidbot history ----------------------------------------

def session_date(text):
    # "1:56 pm on 8 May, 2023"
    return datetime.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(
        tzinfo=datetime.timezone.utc)


def turn_text(turn):
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shared an image: {turn['blip_caption']}]"
    return text


def sessions(sample):
    conv = sample["conversation"]
    n = 1
    while f"session_{n}" in conv:
        turns = conv[f"session_{n}"]
        if turns:
            yield n, session_date(conv[f"session_{n}_date_time"]), turns
        n += 1


def write_history(sample, path):
    turns_by_session = {}
    with open(path, "w") as out:
        for n, start, turns in sessions(sample):
            sender = f"{sample['sample_id']}-s{n}"
            first = turns[0]["speaker"]
            for i, turn in enumerate(turns):
                record = {
                    "role": "user" if turn["speaker"] == first else "assistant",
                    "content": turn_text(turn),
                    "timestamp": (start + datetime.timedelta(seconds=30 * i)).isoformat(),
                    "channel": "locomo",
                    "sender_id": sender,
                }
                out.write(json.dumps(record) + "\n")
            turns_by_session[f"locomo:{sender}"] = [(t["dia_id"], turn_text(t)) for t in turns]
    return turns_by_session


# --- the scripted LLM -----------------------------------------------------------------------

class Script:
    query = ""
    result = None


def reply(request):
    """A search_history call for the current query; "done" once its result is back."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        Script.result = last["content"]
        return {"content": "done"}, "stop"
    arguments = json.dumps({"query": Script.query, "max_results": 10})
    return {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                            "function": {"name": "search_history", "arguments": arguments}}]}, "tool_calls"


# The scripted server's pool, with no retries: a failed call is a failed question.
CONFIG = instant_llm.LLM_YAML + """  retry:
    max_retries: 0
"""


# --- asking and scoring -----------------------------------------------------------------------

ENTRY = re.compile(r"^\[(\d+)\] .*· session (\S+) · (user|assistant)$")
SUMMARY = re.compile(r"^\[(\d+)\] summary of session (\S+), written ")
MATCH = re.compile(r"^  match(?:, \w+)?: (\".*\")$")
LEGACY_ENTRY = re.compile(r"^## Match \d+ — \[(.+)\] \| ")
LEGACY_MATCH = re.compile(r"^\*\*(?:USER|ASSISTANT): (.*)\*\*$")


def parse(output):
    """The entries of a search_history result: (session, matched text) in order."""
    entries, session = [], None
    for line in output.splitlines():
        header = ENTRY.match(line) or SUMMARY.match(line)
        if header:
            session = header.group(2)
            continue
        legacy = LEGACY_ENTRY.match(line)
        if legacy:
            session = legacy.group(1)
            continue
        old = LEGACY_MATCH.match(line)
        if old and session is not None:
            text = old.group(1)
            entries.append((session, text[:-3] + "…" if text.endswith("...") else text))
            session = None
            continue
        match = MATCH.match(line)
        if match and session is not None:
            entries.append((session, json.loads(match.group(1))))
            session = None
    return entries


def turn_of(entry, turns_by_session):
    session, text = entry
    pieces = [p.strip() for p in text.split("…") if p.strip()]
    for dia_id, content in turns_by_session.get(session, []):
        if pieces and all(p in content for p in pieces):
            return dia_id
    return None


def ask(home, query, env):
    Script.query, Script.result = query, None
    done = subprocess.run([BIN, "agent", "-m", "question"], env=env, capture_output=True, text=True)
    if done.returncode != 0 or Script.result is None:
        sys.exit(f"squidbot agent failed ({done.returncode}): {done.stderr[-2000:]}")
    for path in ["sessions/cli_3Alocal.jsonl", "sessions/cli_3Alocal.meta.json"]:
        if os.path.exists(os.path.join(home, path)):
            os.remove(os.path.join(home, path))
    shutil.rmtree(os.path.join(home, "memory", "cli_3Alocal"), ignore_errors=True)
    return Script.result


def evidence(question):
    return {e.strip() for item in question["evidence"] for e in item.split(";") if e.strip()}


def recall(found, wanted, k):
    return len(wanted & set(found[:k])) / len(wanted)


# --- the BM25 baseline ------------------------------------------------------------------------

def words(text):
    return re.findall(r"\w+", text.lower())


def bm25_rank(turns, question, k1=1.2, b=0.75):
    docs = [words(text) for _, text in turns]
    n = len(docs)
    avg = sum(map(len, docs)) / n
    df = collections.Counter(w for d in docs for w in set(d))
    scores = []
    for d in docs:
        tf = collections.Counter(d)
        s = 0.0
        for w in set(words(question)):
            if tf[w]:
                idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                s += idf * tf[w] * (k1 + 1) / (tf[w] + k1 * (1 - b + b * len(d) / avg))
        scores.append(s)
    order = sorted(range(n), key=lambda i: -scores[i])
    return [turns[i][0] for i in order[:10]]


# --- the run ----------------------------------------------------------------------------------

def main():
    if not os.access(BIN, os.X_OK):
        sys.exit(f"{BIN} is missing: cargo build --release (or set SQUIDBOT_BIN)")
    data = json.load(open(DATA))
    url = instant_llm.start(reply)
    results = {mode: collections.defaultdict(list) for mode in ("question", "keywords", "bm25")}
    self_hits = 0
    unmapped = 0
    questions = 0
    for sample in data:
        home = tempfile.mkdtemp(prefix="squidbot-recall.")
        source = os.path.join(home, "original")
        os.makedirs(source)
        turns_by_session = write_history(sample, os.path.join(source, "history.jsonl"))
        all_turns = [t for turns in turns_by_session.values() for t in turns]
        env = {k: v for k, v in os.environ.items() if k not in ("SQUIDBOT_CONFIG", "RUST_LOG")}
        env.update(SQUIDBOT_HOME=home + "/home", HOME=home)
        os.makedirs(home + "/home")
        open(home + "/home/squidbot.yaml", "w").write(CONFIG.format(url=url))
        done = subprocess.run([BIN, "import", source], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"squidbot import failed: {done.stderr}")
        for question in sample["qa"]:
            wanted = evidence(question)
            if question.get("category") not in CATEGORIES or not wanted:
                continue
            questions += 1
            category = question["category"]
            for mode in ("question", "keywords"):
                query = question["question"] if mode == "question" else keywords(question["question"])
                entries = parse(ask(home + "/home", query, env))
                self_hits += sum(1 for session, _ in entries if session == "cli:local")
                found = []
                for entry in entries:
                    turn = turn_of(entry, turns_by_session)
                    if turn is None and entry[0].startswith("locomo:"):
                        unmapped += 1
                    found.append(turn)
                for k in (5, 10):
                    results[mode][(category, k)].append(recall(found, wanted, k))
            ranked = bm25_rank(all_turns, question["question"])
            for k in (5, 10):
                results["bm25"][(category, k)].append(recall(ranked, wanted, k))
        shutil.rmtree(home)
        print(f"{sample['sample_id']}: done", file=sys.stderr)

    def mean(values):
        return sum(values) / len(values) if values else float("nan")

    print(f"LoCoMo recall of search_history: {len(data)} conversations, {questions} questions "
          f"(categories 1-4), {os.path.basename(DATA)}")
    print(f"{'':24}" + "".join(f"{name:>26}" for name in
                               ("search_history, question", "search_history, keywords", "BM25 baseline")))
    rows = [(f"{c} {CATEGORIES[c]}", [c]) for c in CATEGORIES] + [("all (1-4)", list(CATEGORIES))]
    for label, cats in rows:
        cells = []
        for mode in ("question", "keywords", "bm25"):
            r5 = mean([v for c in cats for v in results[mode][(c, 5)]])
            r10 = mean([v for c in cats for v in results[mode][(c, 10)]])
            cells.append(f"R@5 {r5:.3f} R@10 {r10:.3f}")
        print(f"{label:24}" + "".join(f"{cell:>26}" for cell in cells))
    print(f"entries from the asking session: {self_hits} (must be 0); "
          f"entries not mapped to a turn: {unmapped}")


if __name__ == "__main__":
    main()
