#!/usr/bin/env python3
"""scripts/proof webui: Open WebUI in front of squidbot, driven in headless Chromium (#39).

Starts a scripted OpenAI-compatible model (below), `squidbot gateway` with the OpenAI-compatible
endpoint on, and Open WebUI pointed at it as the README says; then, in Debian's Chromium through
Playwright, two conversations: the first tells squidbot a fact (the model stores it with
`memory_write`), the second, a new chat, asks for it and gets it back through squidbot's memory
(MEMORY.md in the prompt), not through the app. Screenshots and logs go to OUT.

    proof_webui.py SQUIDBOT_BINARY OUT
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FACT = "my locker code is 4711"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Model(BaseHTTPRequestHandler):
    """A model with a script: it stores what it is told to remember with `memory_write`, and
    answers a question from the memory in its system prompt."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        messages = body["messages"]
        system = " ".join(m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
                          for m in messages if m["role"] == "system")
        last = messages[-1]
        text = last["content"] if isinstance(last["content"], str) else json.dumps(last["content"])
        message = {"role": "assistant", "content": ""}
        if last["role"] == "tool":
            message["content"] = "Noted, I will remember that."
        elif "remember" in text.lower():
            fact = text.split(":", 1)[-1].strip()
            message["tool_calls"] = [{"id": "call_1", "type": "function", "function": {
                "name": "memory_write", "arguments": json.dumps({"content": "- The owner said: " + fact})}}]
            message["content"] = None
        elif "locker" in text.lower():
            found = re.search(r"locker code is (\d+)", system)
            message["content"] = ("From my memory: your locker code is %s." % found.group(1)) if found \
                else "I do not know your locker code."
        else:
            message["content"] = "Hello from squidbot."
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


def wait_http(url, seconds, headers=None):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=3).read()
            return
        except Exception:
            time.sleep(1)
    sys.exit("no answer from %s within %d s" % (url, seconds))


def main():
    binary, out = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    venv_bin = os.path.dirname(sys.executable)
    model_port, gw_port, webui_port = free_port(), free_port(), free_port()
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
        DATA_DIR=data,
        WEBUI_AUTH="False",
        WEBUI_SECRET_KEY=os.urandom(16).hex(),
        OPENAI_API_BASE_URL=f"http://127.0.0.1:{gw_port}/v1",
        OPENAI_API_KEY=token,
        ENABLE_OLLAMA_API="false",
        ENABLE_FORWARD_USER_INFO_HEADERS="true",
        ENABLE_TITLE_GENERATION="false",
        ENABLE_TAGS_GENERATION="false",
        ENABLE_FOLLOW_UP_GENERATION="false",
        ENABLE_AUTOCOMPLETE_GENERATION="false",
        ENABLE_RETRIEVAL_QUERY_GENERATION="false",
        ENABLE_SEARCH_QUERY_GENERATION="false",
        ENABLE_WEB_SEARCH="false",
        ENABLE_CODE_INTERPRETER="false",
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
    try:
        wait_http(f"http://127.0.0.1:{webui_port}/health", 600)
        drive(f"http://127.0.0.1:{webui_port}", out)
        sessions = sorted(n for n in os.listdir(os.path.join(home, "sessions")) if n.endswith(".jsonl"))
        memory = open(os.path.join(home, "workspace", "MEMORY.md")).read() \
            if os.path.exists(os.path.join(home, "workspace", "MEMORY.md")) else ""
        report = {"sessions": sessions, "memory": memory}
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(report, f, indent=2)
        print(json.dumps(report, indent=2))
    finally:
        os.killpg(webui.pid, signal.SIGTERM)
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(30)


def drive(base, out):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})

        def chat(text, expect, shot):
            page.goto(base + "/", wait_until="load")
            box = page.locator("#chat-input")
            box.wait_for(timeout=60000)
            # The first visit shows what is new in this version: dismissed.
            page.wait_for_timeout(2000)
            for label in ("Okay, Let's Go!", "Okay, Let's Go", "Close"):
                button = page.get_by_role("button", name=label)
                if button.count():
                    button.first.click()
            page.keyboard.press("Escape")
            box.click(force=True)
            page.keyboard.type(text)
            page.keyboard.press("Enter")
            page.wait_for_function("(t) => document.body.innerText.includes(t)", arg=expect, timeout=90000)
            time.sleep(2)
            page.screenshot(path=os.path.join(out, shot), full_page=True)

        chat("Please remember: " + FACT, "Noted, I will remember that.", "1-first-conversation.png")
        chat("What is my locker code?", "From my memory: your locker code is 4711.", "2-second-conversation.png")
        browser.close()


if __name__ == "__main__":
    main()
