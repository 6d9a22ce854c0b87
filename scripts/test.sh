#!/usr/bin/env bash
# Install everything the tests need (Python packages, Debian's Chromium for the browser tests)
# and run the whole suite. Usage: bash scripts/test.sh [extra pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install --quiet --disable-pip-version-check -e ".[dev]"

# Chromium for the browser tests, and a Chinese font so screenshots show the characters.
if [ ! -x /usr/bin/chromium ] || ! fc-list 2>/dev/null | grep -qi "wenquanyi\|wqy"; then
    if [ "$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver fonts-wqy-microhei >/dev/null
fi

python -m ruff check .
python -m pytest "$@"
