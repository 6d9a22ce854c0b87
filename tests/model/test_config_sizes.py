"""A config.json whose sizes disagree with weights.safetensors' header is refused before any
tensor is allocated (issue 76, item 4): one line naming the field and the tensor, never cut;
an absurd size is named as such, not as the allocator's words."""

from __future__ import annotations

import json
import resource
from dataclasses import asdict

import pytest
from safetensors.torch import save_file

from model.adapters.loading import load_translator
from model.transformer import Transformer, TransformerConfig
from model.translator import CheckpointError

SMALL = TransformerConfig(src_vocab_size=40, tgt_vocab_size=30, d_model=16, n_heads=2,
                          n_encoder_layers=1, n_decoder_layers=1, d_ff=32, max_positions=64)


@pytest.fixture
def folder(tmp_path):
    """A folder with a small model's weights and config (the other files need not be there:
    the sizes are checked first)."""
    state = {k: v.contiguous() for k, v in Transformer(SMALL).state_dict().items()
             if k != "output.weight"}
    save_file(state, str(tmp_path / "weights.safetensors"))
    return tmp_path


def write_config(folder, **change):
    (folder / "config.json").write_text(json.dumps({**asdict(SMALL), **change}))


def test_a_config_larger_than_its_weights_is_refused_before_building_the_model(folder):
    write_config(folder, d_model=4096, d_ff=4096 * 4)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CheckpointError) as refused:
        load_translator(folder)
    message = str(refused.value)
    assert "\n" not in message and "d_model = 4096" in message, message
    assert "src_embedding" in message or "tgt_embedding" in message or ".weight" in message, message
    assert "[16" in message or ", 16]" in message, message  # what the file holds, in full
    # a 4096-wide model is ~GBs; nothing near that was allocated, and no 9 s were spent
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000, "KB grown"


@pytest.mark.parametrize("change, named", [
    ({"d_model": 0}, "d_model = 0"),
    ({"n_heads": 3}, "not a multiple of n_heads = 3"),
])
def test_an_absurd_size_is_named(folder, change, named):
    write_config(folder, **change)
    with pytest.raises(CheckpointError) as refused:
        load_translator(folder)
    assert named in str(refused.value) and "corrupt" not in str(refused.value)


def test_a_matching_config_goes_on_to_the_other_files(folder):
    write_config(folder)
    with pytest.raises(CheckpointError) as refused:  # no tokenizers here: the next check says so
        load_translator(folder)
    assert "missing" in str(refused.value)


def test_the_expected_shapes_are_the_models_own():
    """What the check expects is what model/transformer.py builds, for every weight it names."""
    from model.adapters.loading import expected_shapes
    config = TransformerConfig(**{**asdict(SMALL), "n_encoder_layers": 2, "d_ff": 48})
    built = {k: tuple(v.shape) for k, v in Transformer(config).state_dict().items()}
    expected = expected_shapes(config)
    assert expected and all(built[name] == shape for name, shape in expected.items())
