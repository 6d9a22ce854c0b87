"""The training losses: label-smoothed cross-entropy and the unlikelihood against repeating."""

import math

import pytest
import torch

from model.training.loop import repetition_unlikelihood, smoothed_cross_entropy
from model.transformer import BOS_ID, EOS_ID, PAD_ID

V = 12


def _batch(reference: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    tgt_in = torch.tensor([[BOS_ID, *reference]])
    labels = torch.tensor([[*reference, EOS_ID]])
    return tgt_in, labels


def test_no_penalty_where_the_model_puts_nothing_on_the_last_tokens():
    tgt_in, labels = _batch([5, 6, 7])
    logits = torch.full((1, 4, V), -30.0)
    logits[0, torch.arange(4), labels[0]] = 10.0  # every step sure of its own label
    assert float(repetition_unlikelihood(logits, tgt_in, labels)) < 1e-6


def test_probability_on_the_previous_token_is_penalised_as_minus_log_one_minus_p():
    tgt_in, labels = _batch([5, 6])
    logits = torch.full((1, 3, V), -30.0)
    logits[0, 1, 5] = logits[0, 1, 6] = 0.0  # step 2: half on the label 6, half on writing 5 again
    logits[0, 0, 5] = logits[0, 2, EOS_ID] = 10.0
    expected = -math.log(1 - 0.5) / 3  # one penalised position, averaged over the 3 labels
    assert float(repetition_unlikelihood(logits, tgt_in, labels)) == pytest.approx(expected, rel=1e-4)


def test_a_repetition_in_the_reference_is_never_penalised():
    tgt_in, labels = _batch([5, 5, 5])  # e.g. 哈哈哈 in the reference itself
    logits = torch.full((1, 4, V), -30.0)
    logits[0, :3, 5] = 10.0
    logits[0, 3, EOS_ID] = 10.0
    assert float(repetition_unlikelihood(logits, tgt_in, labels)) < 1e-6


def test_padding_bos_and_duplicates_are_not_candidates():
    tgt_in = torch.tensor([[BOS_ID, 5, 5, PAD_ID]])
    labels = torch.tensor([[5, 5, EOS_ID, PAD_ID]])
    logits = torch.zeros((1, 4, V))  # uniform: every candidate has p = 1/V
    # only the <eos> position has a candidate (5, counted once although it is 1 and 2 back)
    expected = -math.log(1 - 1 / V) / 3
    assert float(repetition_unlikelihood(logits, tgt_in, labels)) == pytest.approx(expected, rel=1e-4)


def test_its_gradient_lowers_the_repeated_token_and_raises_the_label():
    tgt_in, labels = _batch([5, 6])
    logits = torch.zeros((1, 3, V), requires_grad=True)
    repetition_unlikelihood(logits, tgt_in, labels).backward()
    assert logits.grad[0, 1, 5] > 0  # descending lowers p(write 5 again) at step 2
    assert logits.grad[0, 1, 6] < 0


def test_label_smoothing_spends_nothing_on_pad_or_bos():
    labels = torch.tensor([[3, EOS_ID]])
    logits = torch.zeros((1, 2, V), requires_grad=True)
    smoothed_cross_entropy(logits, labels, 0.1).backward()
    assert logits.grad[0, :, PAD_ID].tolist() == logits.grad[0, :, BOS_ID].tolist()
    assert float(logits.grad[0, 0, PAD_ID]) > float(logits.grad[0, 0, 7])  # pushed down harder
