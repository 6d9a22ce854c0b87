"""The from-scratch layers against PyTorch's own implementations, and the mask invariants."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from model.transformer import (
    PAD_ID,
    DecoderLayer,
    EncoderLayer,
    Transformer,
    TransformerConfig,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_positions,
)

CONFIG = TransformerConfig(
    src_vocab_size=50, tgt_vocab_size=40, d_model=32, n_heads=4,
    n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0,
)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_attention_matches_torch_sdpa():
    q, k, v = (torch.randn(2, 4, 5, 8) for _ in range(3))
    mask = torch.rand(2, 1, 5, 5) > 0.3
    mask[..., 0] = True  # every query keeps at least one key
    ours, weights = scaled_dot_product_attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 5))
    assert torch.all(weights[~mask.expand_as(weights)] == 0)


def _copy_attention(ours, theirs: nn.MultiheadAttention) -> None:
    theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
    theirs.out_proj.weight.copy_(ours.w_o.weight)
    theirs.out_proj.bias.copy_(ours.w_o.bias)


def _copy_ffn_and_norms(ours, theirs, norms) -> None:
    theirs.linear1.load_state_dict(ours.ffn.linear1.state_dict())
    theirs.linear2.load_state_dict(ours.ffn.linear2.state_dict())
    for mine, torch_norm in norms:
        torch_norm.load_state_dict(mine.norm.state_dict())


@torch.no_grad()
def test_encoder_layer_matches_torch():
    ours = EncoderLayer(CONFIG).eval()
    theirs = nn.TransformerEncoderLayer(
        32, 4, 64, dropout=0.0, activation="relu", batch_first=True, norm_first=False
    ).eval()
    _copy_attention(ours.self_attention, theirs.self_attn)
    _copy_ffn_and_norms(ours, theirs, [(ours.add_norm1, theirs.norm1), (ours.add_norm2, theirs.norm2)])
    x = torch.randn(2, 6, 32)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10], [5, 6, 7, PAD_ID, PAD_ID, PAD_ID]])
    expected = theirs(x, src_key_padding_mask=ids == PAD_ID)
    actual = ours(x, padding_mask(ids))
    keep = ids != PAD_ID  # torch's fast path may zero padded rows; compare the real positions
    torch.testing.assert_close(actual[keep], expected[keep], atol=1e-5, rtol=1e-4)


@torch.no_grad()
def test_decoder_layer_matches_torch():
    ours = DecoderLayer(CONFIG).eval()
    theirs = nn.TransformerDecoderLayer(
        32, 4, 64, dropout=0.0, activation="relu", batch_first=True, norm_first=False
    ).eval()
    _copy_attention(ours.self_attention, theirs.self_attn)
    _copy_attention(ours.cross_attention, theirs.multihead_attn)
    _copy_ffn_and_norms(
        ours, theirs,
        [(ours.add_norm1, theirs.norm1), (ours.add_norm2, theirs.norm2),
         (ours.add_norm3, theirs.norm3)],
    )
    y, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    src = torch.tensor([[5] * 7, [5, 5, 5, 5, PAD_ID, PAD_ID, PAD_ID]])
    expected = theirs(
        y, memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(5),
        memory_key_padding_mask=src == PAD_ID,
    )
    actual = ours(y, memory, causal_mask(5), padding_mask(src))
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-4)


@torch.no_grad()
def test_recorded_attention_invariants():
    model = Transformer(CONFIG).eval()
    src = torch.tensor([[5, 6, 7, 2, PAD_ID, PAD_ID]])
    tgt = torch.tensor([[1, 8, 9, 10]])
    enc_record, dec_record = {}, {}
    memory = model.encode(src, record=enc_record)
    model.decode(tgt, memory, src, record=dec_record)
    for layer in enc_record["layers"]:
        weights = layer["self_attention"]["weights"]
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))
        assert torch.all(weights[..., 4:] == 0), "padding keys get zero weight"
    for layer in dec_record["layers"]:
        self_weights = layer["self_attention"]["weights"][0]
        assert torch.all(self_weights.triu(diagonal=1) == 0), "no attention to future positions"
        torch.testing.assert_close(self_weights.sum(-1), torch.ones(4, 4))
        cross = layer["cross_attention"]["weights"][0]
        assert cross.shape == (4, 4, 6)
        assert torch.all(cross[..., 4:] == 0)


def test_positional_encoding_formula():
    pe = sinusoidal_positions(10, 16)
    pos, i = 3, 2
    angle = pos / 10000 ** (2 * i / 16)
    assert pe[pos, 2 * i].item() == pytest.approx(torch.sin(torch.tensor(angle)).item(), abs=1e-6)
    assert pe[pos, 2 * i + 1].item() == pytest.approx(torch.cos(torch.tensor(angle)).item(), abs=1e-6)
