#!/usr/bin/env python3
"""scripts/proof webui: Open WebUI in front of squidbot, driven in headless Chromium (#39).

Starts a scripted OpenAI-compatible model (below), `squidbot gateway` with the OpenAI-compatible
endpoint on, and Open WebUI pointed at it with the README's settings; then, in Debian's Chromium
through Playwright, two conversations, each a new chat in the page: in the first the owner says
a fact, in the second asks for it. The model knows nothing: asked the question, it calls
squidbot's `search_history` tool and answers with what the tool returned, so the answer in the
page can only come from squidbot's memory of the other conversation (another session). The
proof fails unless the answer shows in the page, the tool was called, and the two chats were two
sessions. Screenshots, logs, every request the model saw and result.json go to OUT.

    proof_webui.py SQUIDBOT_BINARY OUT
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from importlib import metadata
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CODE = "4711"
FACT = "My bike lock code is %s." % CODE
QUESTION = "What is my bike lock code?"
NOTED = "Noted."
ANSWER = "Your bike lock code is %s (search_history found it in an earlier conversation)." % CODE

# Open WebUI's settings that matter, as the README gives them (the base URL and key are added).
WEBUI_SETTINGS = {
    "ENABLE_OLLAMA_API": "false",
    # Each chat's id goes along as X-OpenWebUI-Chat-Id: squidbot's session for that chat.
    "ENABLE_FORWARD_USER_INFO_HEADERS": "true",
    # Open WebUI's built-in tools (time, knowledge, notes, memory...) are sent as client-side
    # `tools` with every message unless the model's capability `builtin_tools` is off; squidbot
    # refuses client-side tools (its own run in its jail). The default for every model:
    "DEFAULT_MODEL_METADATA": json.dumps({"capabilities": {"builtin_tools": False}}),
    # Each generation task is a separate request with the chat's id: it would be a turn of
    # squidbot's session for that chat. Off.
    "ENABLE_TITLE_GENERATION": "false",
    "ENABLE_TAGS_GENERATION": "false",
    "ENABLE_FOLLOW_UP_GENERATION": "false",
    "ENABLE_AUTOCOMPLETE_GENERATION": "false",
    "ENABLE_RETRIEVAL_QUERY_GENERATION": "false",
    "ENABLE_SEARCH_QUERY_GENERATION": "false",
    # squidbot does these itself, under its jail and approvals.
    "ENABLE_WEB_SEARCH": "false",
    "ENABLE_CODE_INTERPRETER": "false",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def text_of(message):
    content = message.get("content")
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content)


class Model(BaseHTTPRequestHandler):
    """A model that knows nothing: it acknowledges a fact, and answers the question only with
    what squidbot's `search_history` returns. Every request is logged to `Model.log`."""

    log = None
    seen = []
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        messages = body["messages"]
        tools = [t["function"]["name"] for t in body.get("tools") or []]
        last = messages[-1]
        text = text_of(last)
        message = {"role": "assistant", "content": ""}
        step = "other"
        if last["role"] == "tool":
            step = "answer from the tool"
            found = re.search(r"bike lock code is (\d+)", text, re.IGNORECASE)
            message["content"] = ANSWER.replace(CODE, found.group(1)) if found \
                else "search_history found nothing about your bike lock code."
        elif QUESTION.lower() in text.lower():
            step = "question"
            if "search_history" in tools:
                message["content"] = None
                message["tool_calls"] = [{"id": "call_1", "type": "function", "function": {
                    "name": "search_history", "arguments": json.dumps({"query": "bike lock code"})}}]
            else:
                message["content"] = "I have no search_history tool."
        elif FACT.lower() in text.lower():
            step = "fact"
            message["content"] = NOTED
        else:
            message["content"] = "Hello from squidbot."
        with Model.lock:
            Model.seen.append({
                "step": step,
                "messages": len(messages),
                "tools": tools,
                # Whether the code was anywhere in what the model was sent before the tool ran.
                "code_in_request": CODE in json.dumps(messages),
                "called": [c["function"]["name"] for c in message.get("tool_calls", [])],
                "reply": message["content"],
            })
            Model.log.write(json.dumps(body) + "\n")
            Model.log.flush()
        answer = {"id": "x", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
                  "choices": [{"index": 0, "message": message,
                               "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                  "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def thread_digest(chat_id):
    """The session squidbot keeps for a conversation the app names `chat_id` (see
    src/channels/http/openai/thread.rs: `digest(&["named", id])`)."""
    import hashlib
    return hashlib.sha256(b"named\0" + chat_id.strip().encode() + b"\0").hexdigest()[:16]


def wait_http(url, seconds, headers=None):
    started = time.time()
    while time.time() < started + seconds:
        try:
            urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=3).read()
            return time.time() - started
        except Exception:
            time.sleep(1)
    sys.exit("no answer from %s within %d s" % (url, seconds))


def version(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as error:
        return "unknown (%s)" % error


def main():
    binary, out = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    venv_bin = os.path.dirname(sys.executable)
    model_port, gw_port, webui_port = free_port(), free_port(), free_port()
    Model.log = open(os.path.join(out, "model-requests.jsonl"), "w")
    server = ThreadingHTTPServer(("127.0.0.1", model_port), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    home = tempfile.mkdtemp(prefix="squidbot-webui-")
    token = "proof-token-" + os.urandom(6).hex()
    with open(os.path.join(home, "squidbot.yaml"), "w") as f:
        f.write(f"""llm:
  providers:
    local:
      api_base: "http://127.0.0.1:{model_port}/v1"
  models:
    scripted:
      provider: local
      model: scripted
  pools:
    default: [scripted]
agents:
  heartbeat:
    enabled: false
gateway:
  http:
    listen: 127.0.0.1:{gw_port}
    token: {token}
    openai: true
""")
    env = dict(os.environ, SQUIDBOT_HOME=home, HOME=home, RUST_LOG="info")
    gw_log = open(os.path.join(out, "gateway.log"), "w")
    gateway = subprocess.Popen([binary, "gateway"], env=env, stdout=gw_log, stderr=gw_log)
    wait_http(f"http://127.0.0.1:{gw_port}/readyz", 30)

    data = tempfile.mkdtemp(prefix="open-webui-")
    webui_env = dict(
        os.environ,
        **WEBUI_SETTINGS,
        OPENAI_API_BASE_URL=f"http://127.0.0.1:{gw_port}/v1",
        OPENAI_API_KEY=token,
        # For the proof only: no account, no network, a fresh data directory.
        DATA_DIR=data,
        WEBUI_AUTH="False",
        WEBUI_SECRET_KEY=os.urandom(16).hex(),
        DEFAULT_MODELS="default",
        OFFLINE_MODE="true",
        HF_HUB_OFFLINE="1",
        RAG_EMBEDDING_MODEL_AUTO_UPDATE="false",
        ENABLE_VERSION_UPDATE_CHECK="false",
    )
    webui_log = open(os.path.join(out, "open-webui.log"), "w")
    webui = subprocess.Popen([os.path.join(venv_bin, "open-webui"), "serve", "--host", "127.0.0.1",
                              "--port", str(webui_port)], env=webui_env, stdout=webui_log,
                             stderr=webui_log, start_new_session=True)
    report = {
        "versions": {
            "open-webui": metadata.version("open-webui"),
            "playwright": metadata.version("playwright"),
            "chromium": version(["/usr/bin/chromium", "--version"]),
            "squidbot": version([binary, "--version"]),
            "python": sys.version.split()[0],
        },
    }
    try:
        report["open_webui_start_s"] = round(wait_http(f"http://127.0.0.1:{webui_port}/health", 900), 1)
        report["chats"] = drive(f"http://127.0.0.1:{webui_port}", out)
    finally:
        os.killpg(webui.pid, signal.SIGTERM)
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(30)
    sessions_dir = os.path.join(home, "sessions")
    sessions = {}
    for name in sorted(os.listdir(sessions_dir)):
        if name.endswith(".jsonl"):
            with open(os.path.join(sessions_dir, name)) as f:
                lines = [json.loads(line) for line in f if line.strip()]
            said = lambda role, text: any(m.get("role") == role and text in text_of(m) for m in lines)
            sessions[name] = {"lines": len(lines), "owner_said_fact": said("user", FACT),
                              "asked": said("user", QUESTION), "answered": said("assistant", ANSWER),
                              "tool_result_has_code": said("tool", CODE)}
    report["sessions"] = sessions
    # squidbot's record of the two chats is kept with the proof; the scratch homes go.
    shutil.copytree(sessions_dir, os.path.join(out, "sessions"), dirs_exist_ok=True)
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(data, ignore_errors=True)
    for chat in report["chats"]:
        chat["session"] = "http_3Aopenai-id-%s.jsonl" % thread_digest(chat["url"].rsplit("/", 1)[-1])
    report["model_requests"] = Model.seen
    problems = check(report)
    report["problems"] = problems
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))
    if problems:
        sys.exit("proof webui FAILED: " + "; ".join(problems))
    print("proof webui: the second chat recalled the first through search_history")


def check(report):
    """What must hold; an empty list when the proof passed."""
    problems = []
    seen = report["model_requests"]
    asked = [r for r in seen if r["step"] == "question"]
    if not any("search_history" in r["called"] for r in asked):
        problems.append("the model never called search_history for the question")
    if not any(r["step"] == "answer from the tool" and r["reply"] == ANSWER for r in seen):
        problems.append("the tool's result did not contain the code")
    sessions = report["sessions"]
    told = [n for n, s in sessions.items() if s["owner_said_fact"]]
    asked = [n for n, s in sessions.items() if s["asked"] and s["answered"] and s["tool_result_has_code"]]
    if len(told) != 1 or len(asked) != 1 or told == asked:
        problems.append("the two chats were not two sessions (fact told in %s, asked and answered "
                        "from the tool in %s)" % (told, asked))
    # Each chat is the session its id names (X-OpenWebUI-Chat-Id), not one found by its text.
    if [c["session"] for c in report["chats"]] != told + asked:
        problems.append("the chats' ids did not name their sessions: %s"
                        % [c["session"] for c in report["chats"]])
    # One model call for the first chat, two (the tool call, the answer) for the second: with
    # Open WebUI's title, tag or follow-up generation on, each of those is a turn of its chat's
    # session too (its prompt quotes the chat, so the model sees the fact or the question again).
    steps = [r["step"] for r in seen]
    if steps != ["fact", "question", "answer from the tool"]:
        problems.append("the model got more than the two chats' requests: %s" % steps)
    return problems


def drive(base, out):
    from playwright.sync_api import sync_playwright

    chats = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1100, "height": 700})

        def chat(text, expect, shot):
            started = time.time()
            page.goto(base + "/", wait_until="load")
            box = page.locator("#chat-input")
            box.wait_for(timeout=120000)
            page.wait_for_timeout(2000)
            # The first visit shows what is new in this version, and toasts may come and go:
            # dismissed where they still are.
            for label in ("Okay, Let's Go!", "Okay, Let's Go", "Close"):
                button = page.get_by_role("button", name=label)
                try:
                    if button.count():
                        button.first.click(timeout=3000)
                except Exception:
                    pass
            page.keyboard.press("Escape")
            loaded = time.time()
            box.click(force=True)
            page.keyboard.type(text)
            page.keyboard.press("Enter")
            sent = time.time()
            try:
                page.wait_for_function("(t) => document.body.innerText.includes(t)", arg=expect,
                                       timeout=180000)
            finally:
                answered = time.time()
                time.sleep(1)
                page.screenshot(path=os.path.join(out, shot))
            chats.append({"sent": text, "expected": expect, "url": page.url,
                          "page_load_s": round(loaded - started, 1),
                          "answer_shown_s": round(answered - sent, 1)})

        chat(FACT, NOTED, "1-first-chat.png")
        chat(QUESTION, ANSWER, "2-second-chat.png")
        browser.close()
    return chats


if __name__ == "__main__":
    main()
