#!/usr/bin/env bash
# Install the independent Matrix client the tests play the human with: matrix-nio with libolm
# (Debian's python3-matrix-nio and python3-olm, for the system python3 that nio_human.py runs
# under). Nothing to start; idempotent.
#
#   nio.sh install
set -euo pipefail
[ "${1:-}" = install ] || { sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
if /usr/bin/python3 -c "import nio, olm; from nio.crypto import ENCRYPTION_ENABLED; assert ENCRYPTION_ENABLED" 2>/dev/null; then
    exit 0
fi
[ "$(id -u)" = 0 ] || { echo "nio.sh: matrix-nio is missing and installing it needs root" >&2; exit 1; }
echo "nio.sh: installing python3-matrix-nio python3-olm" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends python3-matrix-nio python3-olm >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    apt-get install -y --no-install-recommends python3-matrix-nio python3-olm >/dev/null
fi
/usr/bin/python3 -c "import nio, olm; from nio.crypto import ENCRYPTION_ENABLED; assert ENCRYPTION_ENABLED"
