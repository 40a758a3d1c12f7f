#!/usr/bin/env python3
"""SMTP front end for the test mail server: aiosmtpd on plain TCP, AUTH PLAIN/LOGIN,
delivering every message to dovecot over LMTP *before* answering DATA, so that when an
SMTP send returns, the mail is already visible over IMAP (tests need no polling).

    smtp_lmtp.py --port 2525 --lmtp /path/to/dovecot/run/lmtp --users /path/to/users

--lmtp is a unix socket path (starts with '/') or HOST:PORT.
--users is dovecot's passwd-file (lines 'user:{PLAIN}password::::::'); it is re-read on
every AUTH and RCPT, so users added later work at once.
AUTH is checked when a client offers it (wrong credentials: 535) but is not required
unless --auth-required is given. RCPT to an unknown local user is refused (550).
Loopback only; test use only. Needs aiosmtpd (1.4.6).
"""
import argparse
import asyncio
import logging
import signal
import smtplib
import sys

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

log = logging.getLogger("smtp_lmtp")


def read_users(path):
    users = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line or line.startswith("#") or ":" not in line:
                    continue
                name, rest = line.split(":", 1)
                pw = rest.split(":", 1)[0]
                if pw.startswith("{PLAIN}"):
                    pw = pw[len("{PLAIN}"):]
                users[name.lower()] = pw
    except FileNotFoundError:
        pass
    return users


def localpart(addr):
    return addr.split("@", 1)[0].lower()


class Authenticator:
    def __init__(self, users_path):
        self.users_path = users_path

    def __call__(self, server, session, envelope, mechanism, auth_data):
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        user = auth_data.login.decode("utf-8", "replace")
        pw = auth_data.password.decode("utf-8", "replace")
        users = read_users(self.users_path)
        # Accept "alice" and "alice@anything" as the login.
        ok = users.get(localpart(user)) == pw or users.get(user.lower()) == pw
        log.info("AUTH %s user=%s ok=%s", mechanism, user, ok)
        return AuthResult(success=ok, handled=False)


class LmtpHandler:
    def __init__(self, lmtp, users_path):
        self.lmtp = lmtp
        self.users_path = users_path

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if localpart(address) not in read_users(self.users_path):
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    def _deliver(self, mail_from, rcpt_tos, data):
        if self.lmtp.startswith("/"):
            conn = smtplib.LMTP(self.lmtp, timeout=30)
        else:
            host, port = self.lmtp.rsplit(":", 1)
            conn = smtplib.LMTP(host, int(port), timeout=30)
        try:
            # Raises if every recipient is refused; returns the refused ones otherwise.
            return conn.sendmail(mail_from, rcpt_tos, data)
        finally:
            try:
                conn.quit()
            except Exception:
                pass

    async def handle_DATA(self, server, session, envelope):
        data = envelope.original_content or envelope.content
        if isinstance(data, str):
            data = data.encode("utf-8")
        try:
            refused = await asyncio.get_running_loop().run_in_executor(
                None, self._deliver, envelope.mail_from or "<>", envelope.rcpt_tos, data)
        except smtplib.SMTPRecipientsRefused as e:
            log.warning("LMTP refused all recipients: %s", e.recipients)
            return "550 5.1.1 Delivery refused by LMTP: %s" % e.recipients
        except Exception as e:  # noqa: BLE001 - report anything as a temporary failure
            log.exception("LMTP delivery failed")
            return "451 4.3.0 LMTP delivery failed: %s" % e
        if refused:
            log.warning("LMTP refused some recipients: %s", refused)
            return "451 4.3.0 Some recipients refused by LMTP: %s" % refused
        log.info("delivered from=%s to=%s bytes=%d", envelope.mail_from, envelope.rcpt_tos, len(data))
        return "250 OK delivered"


async def main_async(a):
    handler = LmtpHandler(a.lmtp, a.users)
    auth = Authenticator(a.users)
    loop = asyncio.get_running_loop()

    def factory():
        return SMTP(handler, hostname="localhost", decode_data=False,
                    data_size_limit=a.max_size, enable_SMTPUTF8=True,
                    authenticator=auth, auth_require_tls=False,
                    auth_required=a.auth_required)

    server = await loop.create_server(factory, host=a.host, port=a.port)
    log.info("listening on %s:%d, delivering to LMTP %s", a.host, a.port, a.lmtp)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    await server.wait_closed()
    log.info("stopped")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--lmtp", required=True, help="unix socket path or HOST:PORT of dovecot LMTP")
    p.add_argument("--users", required=True, help="dovecot passwd-file with {PLAIN} passwords")
    p.add_argument("--auth-required", action="store_true")
    p.add_argument("--max-size", type=int, default=32 * 1024 * 1024)
    a = p.parse_args()
    if a.host not in ("127.0.0.1", "localhost", "::1"):
        print("smtp_lmtp: refusing to listen on a non-loopback address", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(main_async(a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
