# Measures the email channel end to end: SMTP delivery of a mail to the reply arriving in the
# sender's IMAP inbox, 20 mails, median and p90, plus the gateway's RSS with email running.
#
#   scripts/testenv/up /tmp/squidbot-testenv && cargo build --release
#   python3 scripts/bench/email_latency.py [TESTENV_DIR]
#
# The LLM is a tiny OpenAI-compatible SSE server in this script that answers "ok" at once.
import http.server, imaplib, json, os, smtplib, socket, subprocess, sys, threading, time, statistics
from email.message import EmailMessage
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTENV = sys.argv[1] if len(sys.argv) > 1 else "/tmp/squidbot-testenv"
env = dict(l.strip().split("=",1) for l in open(TESTENV + "/env") if "=" in l)
host, imap_port, smtp_port, maildir = env["SQUIDBOT_TEST_MAIL_HOST"], int(env["SQUIDBOT_TEST_IMAP_PORT"]), int(env["SQUIDBOT_TEST_SMTP_PORT"]), env["SQUIDBOT_TEST_MAIL_DIR"]
tag = str(int(time.time()))
bot, owner = "lbot"+tag, "lown"+tag
for u in (bot, owner):
    subprocess.run([ROOT + "/scripts/testenv/mail.sh","adduser",maildir,u,"pw"], check=True, capture_output=True)
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self,*a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200); self.send_header("Content-Type","text/event-stream"); self.end_headers()
        chunk = {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":None}]}
        self.wfile.write(("data: "+json.dumps(chunk)+"\n\n").encode())
        chunk = {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}
        self.wfile.write(("data: "+json.dumps(chunk)+"\n\ndata: [DONE]\n\n").encode())
srv = http.server.ThreadingHTTPServer(("127.0.0.1",0),H); threading.Thread(target=srv.serve_forever,daemon=True).start()
import tempfile
home = tempfile.mkdtemp(prefix="squidbot-email-latency.")
open(home+"/squidbot.yaml","w").write(f"""llm:
  providers:
    local:
      api_base: "http://127.0.0.1:{srv.server_address[1]}/v1"
  models:
    small:
      provider: local
      model: x
  pools:
    default: [small]
agents:
  heartbeat:
    enabled: false
gateway:
  http:
    enabled: false
channels:
  email:
    enabled: true
    imap_host: {host}
    imap_port: {imap_port}
    smtp_host: {host}
    smtp_port: {smtp_port}
    username: {bot}
    password: pw
    from_address: {bot}@localhost
    allow_from: ["{owner}@localhost"]
    tls: false
    replies_per_hour: 1000
""")
gw = subprocess.Popen([ROOT + "/target/release/squidbot","gateway"], env={**os.environ,"SQUIDBOT_HOME":home,"RUST_LOG":"warn"}, stderr=open(home+"/gw.log","w"))
time.sleep(3)
im = imaplib.IMAP4(host, imap_port); im.login(owner,"pw")
times=[]
for i in range(20):
    m = EmailMessage(); m["From"]=f"{owner}@localhost"; m["To"]=f"{bot}@localhost"; m["Subject"]=f"lat {i}"; m.set_content(f"hello {i}")
    t=time.time()
    with smtplib.SMTP(host, smtp_port) as s: s.send_message(m)
    while True:
        im.select("INBOX"); typ,data = im.search(None, "FROM", f"{bot}@localhost")
        if len(data[0].split()) > i: break
        if time.time()-t>30: sys.exit(f"no reply to {i}")
        time.sleep(0.01)
    times.append((time.time()-t)*1000)
rss = [l for l in open(f"/proc/{gw.pid}/status") if l.startswith("VmRSS")][0].split()[1]
gw.terminate(); gw.wait(timeout=10)
times.sort()
print(f"email delivery->reply: n=20 median {statistics.median(times):.0f} ms, p90 {times[17]:.0f} ms, min {times[0]:.0f}, max {times[-1]:.0f}; gateway RSS with email running {int(rss)/1024:.1f} MiB")
