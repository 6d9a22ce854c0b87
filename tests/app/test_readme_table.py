"""The README's table of held-out figures is the shipped checkpoint's eval.json, as
scripts/heldout_table.py prints it: a new checkpoint cannot ship with an old table."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _heldout_table():
    spec = importlib.util.spec_from_file_location("heldout_table", ROOT / "scripts" / "heldout_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.table


def test_the_readme_table_is_the_shipped_checkpoints_evaluation():
    report = json.loads((ROOT / "model" / "checkpoints" / "eval.json").read_text(encoding="utf-8"))
    table = _heldout_table()(report)
    assert table.count("\n") >= 9  # every test split and the three probes
    assert table in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_table_puts_an_earlier_checkpoint_beside_the_new_one():
    report = json.loads((ROOT / "model" / "checkpoints" / "eval.json").read_text(encoding="utf-8"))
    worse = json.loads(json.dumps(report))
    worse["sets"]["tatoeba_test"]["greedy"]["bleu"] -= 10
    line = next(row for row in _heldout_table()(report, worse).splitlines() if row.startswith("| Tatoeba ("))
    bleu = report["sets"]["tatoeba_test"]["greedy"]["bleu"]
    assert f"{bleu - 10:.1f} / " in line and f"→ **{bleu:.1f} / " in line
