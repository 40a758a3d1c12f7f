#!/usr/bin/env bash
# Install (from PyPI, into a cached venv) the independent clients the OpenAI-compatible
# endpoint's tests drive (tests/servers/openai*.rs): the official `openai` Python SDK and Simon
# Willison's `llm` CLI.
#
#   openai_clients.sh install     install if needed; print the venv's bin directory
#
# Nothing is started: the tests run the clients against the gateway they start.
set -euo pipefail

OPENAI_VERSION="3.57.0"
LLM_VERSION="0.36"
CACHE="${SQUIDBOT_TESTENV_CACHE:-$HOME/.cache/squidbot-testenv}"
VENV="$CACHE/openai-clients-venv"

die() { echo "openai_clients.sh: error: $*" >&2; exit 1; }

venv_ok() {
    [ -x "$VENV/bin/python" ] && [ -x "$VENV/bin/llm" ] &&
        "$VENV/bin/python" - <<PY >/dev/null 2>&1
import sys
from importlib.metadata import version
sys.exit(0 if (version("openai"), version("llm")) == ("$OPENAI_VERSION", "$LLM_VERSION") else 1)
PY
}

case "${1:-}" in
install)
    if ! venv_ok; then
        command -v python3 >/dev/null || die "python3 not found (apt-get install -y python3 python3-venv)"
        mkdir -p "$CACHE"
        # Two tests may install at once: one installs, the other waits for it.
        exec 9>"$CACHE/openai-clients.lock"
        flock 9
        if ! venv_ok; then
            [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV" ||
                die "python3 -m venv $VENV failed (apt-get install -y python3-venv)"
            "$VENV/bin/pip" install --disable-pip-version-check -q \
                "openai==$OPENAI_VERSION" "llm==$LLM_VERSION" ||
                die "pip install openai==$OPENAI_VERSION llm==$LLM_VERSION failed"
            venv_ok || die "openai or llm is installed but does not load"
        fi
    fi
    echo "$VENV/bin"
    ;;
*)
    sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
