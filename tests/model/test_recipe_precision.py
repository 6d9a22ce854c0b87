"""``[train] precision = "bfloat16"``: the forward pass under CPU autocast, the weights and optimizer
float32, the checkpoint float16 like every stage result; the same losses twice; an unknown precision
refused before any data is read."""

import json

import pytest
from safetensors.torch import load_file

from model.training.recipe import parse_recipe
from tests.model.test_training import TINY, _run, tiny  # noqa: F401 (the fixture)


def _bfloat16(text: str) -> str:
    return text.replace("threads = 1", 'threads = 1\nprecision = "bfloat16"')


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision is 'float32' or 'bfloat16'"):
        parse_recipe(TINY.format(epochs=1, warmup=10).replace("threads = 1",
                                                              'threads = 1\nprecision = "int8"'))
    assert parse_recipe(_bfloat16(TINY.format(epochs=1, warmup=10))).precision == "bfloat16"
    assert parse_recipe(TINY.format(epochs=1, warmup=10)).precision == "float32"


def test_a_bfloat16_recipe_trains_and_gives_the_same_losses_twice(tiny, tmp_path):  # noqa: F811
    data, recipe = tiny
    path = recipe(epochs=1, warmup=20)
    path.write_text(_bfloat16(path.read_text(encoding="utf-8")), encoding="utf-8")
    runs = [json.loads((_run(path, data, tmp_path / name) / "history.json").read_text())
            for name in ("a", "b")]
    losses = [[s["loss"] for s in run["earlier_stages"][0]["steps"]] for run in runs]
    assert losses[0] == losses[1] and len(losses[0]) >= 2
    assert losses[0][-1] < losses[0][0]  # it learns
    assert runs[0]["earlier_stages"][0]["settings"]["precision"] == "bfloat16"
    weights = load_file(str(tmp_path / "a" / "out" / "weights.safetensors"))
    # stored in float16 (the recipe rounds to it at every stage boundary), not in bfloat16
    assert {str(t.dtype) for t in weights.values()} == {"torch.float16"}
