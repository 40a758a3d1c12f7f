# Measures both chat channels end to end against the real test servers, with one release
# gateway running Matrix (E2EE crypto store on) and email at once:
#   - idle RSS with both channels connected (TARGETS.md: <= 25 MiB);
#   - Matrix: a human's message sent over the client-server API -> the bot's reply arriving in
#     the human's /sync long-poll, 20 times, median and p90 (target <= 150 ms);
#   - email: SMTP delivery of a mail -> the reply in the sender's IMAP inbox, 20 times, median
#     and p90 (target <= 500 ms; dovecot itself holds every IDLE notification 500 ms, see
#     BENCHMARKS.md);
#   - RSS after the 40 turns.
#
#   scripts/testenv/up /tmp/squidbot-testenv && cargo build --release
#   python3 scripts/bench/channel_latency.py [TESTENV_DIR]
#
# The LLM is the OpenAI-compatible server of instant_llm.py, which answers "ok" at once.
# The human's side is the plain Matrix client-server API (an unencrypted DM), standard library
# only, so the number is the gateway's and the homeserver's, not a client SDK's.
import imaplib, json, os, smtplib, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instant_llm
import statistics, urllib.parse, urllib.request
from email.message import EmailMessage

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTENV = sys.argv[1] if len(sys.argv) > 1 else "/tmp/squidbot-testenv"
ROUNDS = 20
env = dict(l.strip().split("=", 1) for l in open(TESTENV + "/env") if "=" in l)
hs, secret = env["SQUIDBOT_TEST_MATRIX_URL"], env["SQUIDBOT_TEST_MATRIX_SECRET"]
host, imap_port, smtp_port = env["SQUIDBOT_TEST_MAIL_HOST"], int(env["SQUIDBOT_TEST_IMAP_PORT"]), int(env["SQUIDBOT_TEST_SMTP_PORT"])
tag = str(int(time.time()))


LLM_URL = instant_llm.start()


def matrix(method, path, token=None, body=None, timeout=60):
    req = urllib.request.Request(hs + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": "Bearer " + token} if token else {})})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.load(resp)


def register(user):
    out = subprocess.run([sys.executable, ROOT + "/scripts/testenv/synapse_register.py", "--url", hs,
                          "--secret", secret, user, "pw"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def rss_mib(pid):
    line = [l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")][0]
    return int(line.split()[1]) / 1024


human, bot = register("lhuman" + tag), register("lbot" + tag)
for u in ("mbot" + tag, "mown" + tag):
    subprocess.run([ROOT + "/scripts/testenv/mail.sh", "adduser", env["SQUIDBOT_TEST_MAIL_DIR"], u, "pw"],
                   check=True, capture_output=True)
mail_bot, mail_owner = "mbot" + tag + "@localhost", "mown" + tag + "@localhost"

home = tempfile.mkdtemp(prefix="squidbot-channel-latency.")
open(home + "/squidbot.yaml", "w").write(instant_llm.LLM_YAML.format(url=LLM_URL) + f"""agents:
  heartbeat:
    enabled: false
gateway:
  http:
    enabled: false
channels:
  matrix:
    enabled: true
    homeserver: "{hs}"
    user_id: "{bot['user_id']}"
    password: pw
    device_id: LATENCY
    allowlist: ["{human['user_id']}"]
    auto_join: true
  email:
    enabled: true
    imap_host: {host}
    imap_port: {imap_port}
    smtp_host: {host}
    smtp_port: {smtp_port}
    username: mbot{tag}
    password: pw
    from_address: {mail_bot}
    allow_from: ["{mail_owner}"]
    tls: false
    replies_per_hour: 1000
""")
# SQUIDBOT_BENCH_WRAP runs the gateway under a profiler (scripts/build/startup_symbols.py).
WRAP = os.environ.get("SQUIDBOT_BENCH_WRAP", "").split()
gw = subprocess.Popen(WRAP + [os.environ.get("SQUIDBOT_BIN", ROOT + "/target/release/squidbot"), "gateway"],
                      env={**os.environ, "SQUIDBOT_HOME": home, "RUST_LOG": "warn"},
                      stderr=open(home + "/gateway.log", "w"))

# The human opens a DM with the bot and waits for the bot to auto-join it.
token = human["access_token"]
room = matrix("POST", "/_matrix/client/v3/createRoom", token,
              {"invite": [bot["user_id"]], "is_direct": True, "preset": "trusted_private_chat"})["room_id"]
room_q = urllib.parse.quote(room)
deadline = time.time() + 60
while bot["user_id"] not in matrix("GET", f"/_matrix/client/v3/rooms/{room_q}/joined_members", token)["joined"]:
    if time.time() > deadline or gw.poll() is not None:
        sys.exit("the bot never joined; see " + home + "/gateway.log")
    time.sleep(0.1)
time.sleep(5)  # let the email channel log in and arm IDLE, and both channels settle
idle_rss = rss_mib(gw.pid)

flt = urllib.parse.quote(json.dumps({"room": {"rooms": [room], "timeline": {"types": ["m.room.message"]}},
                                     "presence": {"not_types": ["*"]}, "account_data": {"not_types": ["*"]}}))
since = matrix("GET", f"/_matrix/client/v3/sync?filter={flt}&timeout=0", token)["next_batch"]
matrix_ms = []
for i in range(ROUNDS):
    t = time.time()
    matrix("PUT", f"/_matrix/client/v3/rooms/{room_q}/send/m.room.message/lat{i}", token,
           {"msgtype": "m.text", "body": f"hello {i}"})
    answered = False
    while not answered:
        if time.time() - t > 30:
            sys.exit(f"no Matrix reply to {i}; see {home}/gateway.log")
        sync = matrix("GET", f"/_matrix/client/v3/sync?filter={flt}&timeout=30000&since={since}", token)
        since = sync["next_batch"]
        events = sync.get("rooms", {}).get("join", {}).get(room, {}).get("timeline", {}).get("events", [])
        answered = any(e["sender"] == bot["user_id"] for e in events)
    matrix_ms.append((time.time() - t) * 1000)

im = imaplib.IMAP4(host, imap_port)
im.login("mown" + tag, "pw")
email_ms = []
for i in range(ROUNDS):
    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = mail_owner, mail_bot, f"lat {i}"
    m.set_content(f"hello {i}")
    t = time.time()
    with smtplib.SMTP(host, smtp_port) as s:
        s.send_message(m)
    while True:
        im.select("INBOX")
        _, data = im.search(None, "FROM", mail_bot)
        if len(data[0].split()) > i:
            break
        if time.time() - t > 30:
            sys.exit(f"no email reply to {i}; see {home}/gateway.log")
        time.sleep(0.01)
    email_ms.append((time.time() - t) * 1000)

busy_rss = rss_mib(gw.pid)
gw.terminate()
gw.wait(timeout=15)


def summary(name, ms):
    ms = sorted(ms)
    return (f"{name}: n={len(ms)} median {statistics.median(ms):.0f} ms, p90 {ms[int(len(ms) * 0.9) - 1]:.0f} ms, "
            f"min {ms[0]:.0f}, max {ms[-1]:.0f}")


print(summary("matrix message->reply", matrix_ms))
print(summary("email delivery->reply", email_ms))
print(f"gateway RSS with Matrix (E2EE store) + email running: idle {idle_rss:.1f} MiB, after {2 * ROUNDS} turns {busy_rss:.1f} MiB")
