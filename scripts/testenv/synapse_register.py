#!/usr/bin/env python3
"""Create a Matrix user on a test Synapse through the shared-secret admin API.

    synapse_register.py --url http://127.0.0.1:PORT --secret SECRET [--admin] USER PASSWORD

GETs a nonce from /_synapse/admin/v1/register, then POSTs the registration with
mac = HMAC-SHA1(secret, nonce NUL user NUL password NUL ("admin"|"notadmin")).
Prints the JSON answer (user_id, access_token, device_id, ...) on stdout.
Exit status 0 on success; 3 if the user already exists (M_USER_IN_USE); 1 otherwise.
Standard library only.
"""
import argparse
import hashlib
import hmac
import json
import sys
import urllib.error
import urllib.request


def call(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.load(e)
        except ValueError:
            return e.code, {"error": str(e)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True, help="homeserver base URL, e.g. http://127.0.0.1:8008")
    p.add_argument("--secret", required=True, help="registration_shared_secret")
    p.add_argument("--admin", action="store_true", help="make the user a server admin")
    p.add_argument("user", help="localpart, e.g. alice")
    p.add_argument("password")
    a = p.parse_args()

    endpoint = a.url.rstrip("/") + "/_synapse/admin/v1/register"
    status, body = call("GET", endpoint)
    if status != 200 or "nonce" not in body:
        print(f"synapse_register: GET nonce failed: HTTP {status} {body}", file=sys.stderr)
        return 1
    nonce = body["nonce"]
    mac = hmac.new(a.secret.encode(),
                   b"\x00".join(s.encode() for s in
                                (nonce, a.user, a.password, "admin" if a.admin else "notadmin")),
                   hashlib.sha1).hexdigest()
    status, body = call("POST", endpoint, {
        "nonce": nonce, "username": a.user, "password": a.password,
        "admin": a.admin, "mac": mac,
    })
    if status == 200:
        print(json.dumps(body))
        return 0
    if body.get("errcode") == "M_USER_IN_USE":
        print(f"synapse_register: user {a.user} already exists", file=sys.stderr)
        return 3
    print(f"synapse_register: registration failed: HTTP {status} {body}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
