#!/usr/bin/env bash
# Re-make the locks from pyproject.toml's ranges: requirements.lock (what the app needs) and
# requirements-dev.lock (that plus training and test tools, pinned to the same versions).
# Every package is pinned with its hashes. Run after changing a dependency in pyproject.toml;
# `--upgrade` moves every pin to the newest release the ranges allow. Then run the tests.
#   bash scripts/lock.sh [--upgrade]
#
# torch is the CPU build (`+cpu`), which only PyTorch's own wheel index has, so each lock starts
# with that index as an option line: `pip install -r LOCK` then finds it with no extra flag.
# pip-compile's own index lines are left out (--no-emit-index-url): they would copy whatever
# mirrors this machine's pip is configured with into the locks.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_INDEX="--extra-index-url https://download.pytorch.org/whl/cpu"
python -m pip install --quiet "pip-tools>=7.4,<8"
COMMON=(--quiet --generate-hashes --strip-extras --no-emit-index-url --no-emit-find-links --allow-unsafe
        $TORCH_INDEX "$@")

# the option line goes right after pip-compile's header (its first line without a leading #)
with_index() {
    python - "$1" "$TORCH_INDEX" <<'PY'
import sys
from pathlib import Path

lock, option = Path(sys.argv[1]), sys.argv[2]
lines = [line for line in lock.read_text(encoding="utf-8").splitlines() if line != option]
first = next(i for i, line in enumerate(lines) if not line.startswith("#"))
lines.insert(first, option)
lock.write_text("\n".join(lines) + "\n", encoding="utf-8")
PY
}

python -m piptools compile "${COMMON[@]}" -o requirements.lock pyproject.toml
with_index requirements.lock
# the runtime lock is an input of the dev lock, so both agree on every shared package
python -m piptools compile "${COMMON[@]}" --extra dev -o requirements-dev.lock pyproject.toml requirements.lock
with_index requirements-dev.lock
