"""/tokens: ids, a padded mini-batch, its labels and masks."""

from __future__ import annotations

import torch

from app.pages import tokens as figs
from tests.app.checks import assert_valid_figures, field_of

CAT = "The cat sits on the mat."


def test_tokens_batch_and_masks(app_client):
    body = app_client.post("/api/figures/tokens", json={"text": CAT}).json()
    batch = body["batch"]
    assert len(batch["sources"]) == 3 and batch["sources"][0] == CAT
    assert [e["token"] for e in body["english"]][-1] == "<eos>"
    assert "cat" in [e["token"] for e in body["english"]]
    width = len(batch["source_ids"][0])
    t_width = len(batch["decoder_ids"][0])
    for row in range(3):
        ids, length = batch["source_ids"][row], batch["source_lengths"][row]
        assert len(ids) == width
        assert ids[length:] == [0] * (width - length)  # <pad> = 0 after the sentence
        assert batch["source_padding"][row] == [1] * length + [0] * (width - length)
        assert batch["decoder_ids"][row][0] == 1  # <bos>
        # labels are the decoder input shifted left by one, ending in <eos> (2)
        target_length = batch["target_lengths"][row]
        assert batch["label_ids"][row][: target_length - 1] == batch["decoder_ids"][row][1:target_length]
        assert batch["label_ids"][row][target_length - 1] == 2
        encoder = batch["encoder_mask"][row]
        assert len(encoder) == width and all(r == batch["source_padding"][row] for r in encoder)
        decoder = batch["decoder_mask"][row]
        assert len(decoder) == t_width
        for q, mask_row in enumerate(decoder):
            assert all(v == 0 for v in mask_row[q + 1:])  # nothing from the future
            assert mask_row[: q + 1] == [int(k < target_length) for k in range(q + 1)]
        cross = batch["cross_mask"][row]
        assert len(cross) == t_width and all(r == batch["source_padding"][row] for r in cross)
    # the companions are shorter and longer, so someone in the batch is padded
    assert body["padding_share"]["pad"] > 0
    masks = body["figures"]["masks"]
    assert len(masks) == 3 and set(masks[0]) == {"padding", "causal", "cross"}
    assert masks[0]["padding"]["data"][0]["type"] == "heatmap"


def test_tokens_rejects_non_english(app_client):
    assert field_of(app_client.post("/api/figures/tokens", json={"text": "猫坐在垫子上"})) == "text"


TOKENS = ["the", "cat", "sits", "on", "the", "mat", ".", "<eos>"]


def test_mask_heatmap_keeps_repeated_tokens_apart():
    mask = [[1] * 7 + [0] for _ in TOKENS]
    figure = figs.mask_heatmap(mask, TOKENS, TOKENS, "padding")
    trace = figure["data"][0]
    assert trace["type"] == "heatmap"
    assert len(set(trace["x"])) == len(TOKENS)  # "the" twice → two columns
    assert [x.replace("\u200b", "") for x in trace["x"]] == TOKENS
    assert trace["z"] == mask and (trace["zmin"], trace["zmax"]) == (0, 1)
    assert "blocked" in trace["text"][0][-1] and "may attend" in trace["text"][0][0]
    assert_valid_figures(figure)


def test_batch_heatmap_shows_tokens_and_ids():
    figure = figs.batch_heatmap([["a", "<pad>"], ["b", "c"]], [[5, 0], [6, 7]], [[1, 0], [1, 1]],
                                ["yours", "sentence 2"])
    trace = figure["data"][0]
    assert trace["text"][0][1] == "<pad><br>0"
    assert trace["texttemplate"] == "%{text}" and trace["y"] == ["yours", "sentence 2"]
    # the page keeps each labelled cell readable: at least this wide (static/js/common.js)
    assert figure["layout"]["meta"]["min_width"] == figs.BATCH_MARGIN_PX + 2 * figs.BATCH_CELL_PX
    assert_valid_figures(figure)


def test_batch_masks_are_the_models_own(tiny_translator):
    """The page builds its masks in plain Python; they equal what the model computes from the
    same padded ids with padding_mask / causal_mask / decoder_self_mask."""
    from model.transformer import causal_mask, decoder_self_mask, padding_mask

    batch = figs.padded_batch(tiny_translator, [CAT, "We are students."],
                              ["猫坐在垫子上。", "我们是学生。"])
    src, tgt = torch.tensor(batch["source_ids"]), torch.tensor(batch["decoder_ids"])
    keys = padding_mask(src)  # (B, 1, 1, S)
    s_len, t_len = src.size(1), tgt.size(1)
    assert batch["encoder_mask"] == keys.expand(-1, 1, s_len, s_len)[:, 0].int().tolist()
    assert batch["cross_mask"] == keys.expand(-1, 1, t_len, s_len)[:, 0].int().tolist()
    assert batch["decoder_mask"] == decoder_self_mask(tgt)[:, 0].int().tolist()
    assert batch["causal"] == causal_mask(t_len)[0, 0].int().tolist()
