"""The picture's data contract is owned by its page (issue 56, item 10): the model package knows
nothing of the page's scripts, and the scripts spell no stage or sublayer of the model — they
loop over the view header's ``layout`` (``model/explain/record.py``'s list), so a model with
another layout or more layers draws without a change to them
(``tests/e2e/test_xray_layout.py`` checks the rows drawn against the header)."""

from __future__ import annotations

import re
from pathlib import Path

from model.explain.record import block_names, layout

ROOT = Path(__file__).resolve().parents[2]


def _names() -> set[str]:
    """Every stage, sublayer and block name of the model's own list, both sides."""
    stages = {entry["name"] for side in ("encoder", "decoder") for entry in layout(side, 1)}
    return stages | set(block_names())


def test_the_scripts_spell_no_stage_or_sublayer_of_the_model():
    names = _names()
    assert {"self_attention", "cross_attention", "ffn", "add_norm1", "add_norm3", "embedding"} <= names
    alternatives = "|".join(sorted(map(re.escape, names)))
    quoted = re.compile(rf"""(["'`])({alternatives})\1""")
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in sorted((ROOT / "static" / "js").rglob("*.js"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if quoted.search(line)]
    assert found == []


def test_the_model_package_knows_no_page_script():
    found = [str(path.relative_to(ROOT)) for path in (ROOT / "model").rglob("*.py")
             if "static/js" in path.read_text(encoding="utf-8")]
    assert found == []


def test_the_layout_is_the_recorded_stages_in_order():
    """One entry per stage of RecordedPass.stages (same names, same layers), then the decoder's
    output head; every kind is one the scripts know."""
    for side, sublayers in (("encoder", 2), ("decoder", 3)):
        for n_layers in (1, 3, 6):
            entries = layout(side, n_layers)
            stages = [e for e in entries if e["kind"] != "logits"]
            assert len(stages) == 1 + 2 * sublayers * n_layers
            assert [e["layer"] for e in stages] == [None] + [
                layer for layer in range(n_layers) for _ in range(2 * sublayers)]
            kinds = {e["kind"] for e in entries}
            assert kinds <= {"embed", "attention", "add_norm", "feed_forward", "logits"}
            for i, entry in enumerate(stages):  # an Add & Norm adds the stage before it
                if entry["kind"] == "add_norm":
                    assert stages[i - 1]["name"] == entry["after"]
    assert layout("decoder", 2)[-1]["kind"] == "logits"
    assert [e["masked"] for e in layout("decoder", 1) if e["kind"] == "attention"] == [True, False]
    assert [e["attends"] for e in layout("decoder", 1) if e["kind"] == "attention"] == ["self", "cross"]


def test_the_pages_data_contract_imports_no_torch():
    """app/xray packs numpy arrays the model package hands it (model/explain/arrays.py)."""
    from tests.model.test_package_shape import _imports

    for path in sorted((ROOT / "app" / "xray").glob("*.py")):
        assert not {m for m in _imports(path) if m.split(".")[0] == "torch"}, path.name
