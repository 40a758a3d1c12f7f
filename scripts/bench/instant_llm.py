# The benches' LLM: a tiny OpenAI-compatible server on loopback that answers every chat
# completion at once with the streamed reply "ok" (TCP_NODELAY set, so a client that reuses its
# connection does not stall on delayed ACKs). `start()` runs it on a daemon thread and returns
# its base URL for `api_base`; `start(reply)` answers with `reply(request)`, a streamed
# `(delta, finish_reason)` pair, instead.
import http.server, json, os, socket, sys, threading, time, urllib.request

# The `llm:` section of a squidbot.yaml whose only pool calls this server at `{url}`.
LLM_YAML = """llm:
  providers:
    local:
      api_base: "{url}"
  models:
    small:
      provider: local
      model: x
  pools:
    default: [small]
"""


class _Llm(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *a):
        pass

    reply = staticmethod(lambda request: ({"content": "ok"}, "stop"))

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        delta, finish = self.reply(request)
        chunks = [{"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}]
        body = "".join("data: " + json.dumps(c) + "\n\n" for c in chunks) + "data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())


def write_history(home, messages, topic):
    """A `cli:local` history of `messages` alternating user/assistant records about `topic`."""
    os.makedirs(home + "/sessions")
    with open(home + "/sessions/cli_3Alocal.jsonl", "w") as f:
        for i in range(messages):
            role = "user" if i % 2 == 0 else "assistant"
            f.write(json.dumps({"role": role, "content": f"message {i} about {topic}",
                                "timestamp": "2026-11-01T10:00:00+00:00"}) + "\n")


def start(reply=None):
    """Starts the server on an ephemeral loopback port; returns its `/v1` base URL."""
    handler = _Llm
    if reply is not None:
        handler = type("_Scripted", (_Llm,), {"reply": staticmethod(reply)})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def wait_ready(port, process, seconds=180):
    """Waits for the gateway `process` listening on `port` to answer `/readyz`; exits the bench
    if it dies or takes longer than `seconds` (valgrind makes start-up slow)."""
    deadline = time.time() + seconds
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5)
            return
        except OSError:
            if time.time() > deadline or process.poll() is not None:
                sys.exit(f"the gateway on port {port} never became ready")
            time.sleep(0.5)
