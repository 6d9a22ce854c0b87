#!/usr/bin/env bash
# Re-make the locks from pyproject.toml's ranges: requirements.lock (what the app needs) and
# requirements-dev.lock (that plus training and test tools, pinned to the same versions).
# Every package is pinned with its hashes. Run after changing a dependency in pyproject.toml;
# `--upgrade` moves every pin to the newest release the ranges allow. Then run the tests.
#   bash scripts/lock.sh [--upgrade]
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet "pip-tools>=7.4,<8"
COMMON=(--quiet --generate-hashes --strip-extras --no-emit-index-url --no-emit-find-links --allow-unsafe "$@")
python -m piptools compile "${COMMON[@]}" -o requirements.lock pyproject.toml
# the runtime lock is an input of the dev lock, so both agree on every shared package
python -m piptools compile "${COMMON[@]}" --extra dev -o requirements-dev.lock pyproject.toml requirements.lock
