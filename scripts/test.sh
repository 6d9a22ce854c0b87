#!/usr/bin/env bash
# Install exactly the locked packages (requirements-dev.lock, hashes checked), the project itself,
# Debian's Chromium for the browser tests, then run the whole suite.
# Usage: bash scripts/test.sh [extra pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

PIP=(python -m pip --disable-pip-version-check)
# the same install line as the README's; the lock names PyTorch's CPU wheel index for torch
"${PIP[@]}" install --quiet --retries 1 --require-hashes -r requirements-dev.lock
"${PIP[@]}" install --quiet --no-deps --no-build-isolation -e ".[dev]"

# Chromium for the browser tests, a Chinese font so screenshots show the characters, and nginx
# for the scale-out test (tests/prod/test_nginx.py runs docs/deploy.md's configuration).
if [ ! -x /usr/bin/chromium ] || ! fc-list 2>/dev/null | grep -qi "wenquanyi\|wqy" \
        || { ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; }; then
    if [ "$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver fonts-wqy-microhei nginx >/dev/null
fi

python -m ruff check .
python -m pytest "$@"
