"""model/explain/interpret.py: the logit lens and source attributions, on a tiny random model (and the
last-layer lens once on the shipped checkpoint)."""

from __future__ import annotations

import math

import pytest
import torch

from model.decoding import DecodingOptions, mask_special
from model.explain import interpret
from model.transformer import decoder_self_mask, padding_mask

TEXT = "The cat sits on the mat."
torch.set_num_threads(1)  # the tests share the machine with other work


@pytest.fixture(scope="module")
def trace(tiny_translator):
    return tiny_translator.trace(TEXT, DecodingOptions(max_len=6))


@pytest.fixture(scope="module")
def lens(tiny_translator, trace):
    return interpret.logit_lens(tiny_translator, trace)


def assert_last_layer_is_the_step_distribution(lens, trace):
    assert len(lens) == len(trace.steps)
    for step_lens, step in zip(lens, trace.steps, strict=True):
        last = step_lens.layers[-1]
        assert last.chosen_prob == pytest.approx(step.prob, abs=2e-6)
        assert [c.id for c in last.top] == [c.id for c in step.top[: len(last.top)]]
        for ours, real in zip(last.top, step.top, strict=False):
            assert ours.prob == pytest.approx(real.prob, abs=2e-6)


def test_last_layer_lens_is_the_real_distribution(lens, trace):
    assert_last_layer_is_the_step_distribution(lens, trace)


@pytest.mark.parametrize("options", [
    DecodingOptions(strategy="beam", beam_size=3, max_len=6),
    DecodingOptions(strategy="sample", temperature=5.0, seed=3, max_len=6),
])
def test_the_lens_follows_beam_search_and_sampling(tiny_translator, options):
    """Beam search's chosen path and sampled characters: still the real distribution at the top
    layer, and a sampled character need not be any layer's favourite."""
    trace = tiny_translator.trace(TEXT, options, forced_prefix=["猫"])
    lens = interpret.logit_lens(tiny_translator, trace)
    assert_last_layer_is_the_step_distribution(lens, trace)
    assert lens[0].token == "猫"
    for step in lens:
        if step.layers[-1].chosen_rank > 1 and all(layer.chosen_rank > 1 for layer in step.layers):
            assert step.first_top_layer is None


def test_last_layer_lens_is_the_real_distribution_on_the_shipped_model(shipped_translator):
    trace = shipped_translator.trace(TEXT)
    lens = interpret.logit_lens(shipped_translator, trace)
    assert_last_layer_is_the_step_distribution(lens, trace)
    assert all(step.layers[-1].chosen_rank == 1 for step in lens)  # greedy: the top is chosen


def test_intermediate_layers_go_through_the_same_projection_without_an_extra_norm(
    tiny_translator, trace, lens
):
    """Layer l's lens = softmax(output projection (+bias) of layer l's output), by hand."""
    model = tiny_translator.model
    src = torch.tensor([trace.source_ids])
    tgt = torch.tensor([trace.decoder_ids])
    with torch.no_grad():
        memory = model.encode(src)
        y = model.tgt_embedding(tgt)
        for layer, block in enumerate(model.decoder_layers):
            y = block(y, memory, decoder_self_mask(tgt), padding_mask(src))
            logits = y[0] @ model.output.weight.T + model.output.bias
            probs = torch.softmax(mask_special(logits), dim=-1)
            for t, step in enumerate(trace.steps):
                layer_lens = lens[t].layers[layer]
                assert layer_lens.chosen_prob == pytest.approx(float(probs[t, step.id]), abs=2e-6)
                assert layer_lens.top[0].id == int(probs[t].argmax())
                assert layer_lens.chosen_rank == int((probs[t] > probs[t, step.id]).sum()) + 1


def test_first_top_layer_is_the_first_layer_ranking_the_choice_first(lens):
    for step in lens:
        ranks = [layer.chosen_rank for layer in step.layers]
        expected = ranks.index(1) if 1 in ranks else None
        assert step.first_top_layer == expected
        assert step.candidate_ids[0] == step.id and len(set(step.candidate_ids)) == len(step.candidates)
        for layer, row in zip(step.layers, step.grid, strict=True):
            assert (layer.top[0].id == step.id) == (layer.chosen_rank == 1)
            assert row[0] == layer.chosen_prob  # the grid's first column is the chosen character
            for candidate in layer.top:
                if candidate.id in step.candidate_ids:
                    assert row[step.candidate_ids.index(candidate.id)] == candidate.prob


def hand_gradient_x_input(translator, trace, step: int) -> list[float]:
    """d log p(chosen at step) / d(token vectors) · token vectors, by plain autograd."""
    model = translator.model
    src = torch.tensor([trace.source_ids])
    tgt = torch.tensor([trace.decoder_ids])
    embedding = model.src_embedding
    tokens = (embedding.tokens(src) * math.sqrt(embedding.d_model)).detach().requires_grad_(True)
    x = tokens + embedding.positions[: src.size(1)]
    for block in model.encoder_layers:
        x = block(x, padding_mask(src))
    logits = mask_special(model.decode(tgt, x, src))
    log_p = torch.log_softmax(logits[0, step], dim=-1)[trace.steps[step].id]
    (grad,) = torch.autograd.grad(log_p, tokens)  # not .backward(): the weights stay untouched
    return (grad[0] * tokens[0]).sum(dim=-1).tolist()


def test_gradient_x_input_matches_hand_computed_autograd(tiny_translator, trace):
    parameters = list(tiny_translator.model.parameters())
    for step in range(len(trace.steps)):
        result = interpret.attributions(tiny_translator, trace, step, ig_steps=4)
        expected = hand_gradient_x_input(tiny_translator, trace, step)
        assert result.gradient_x_input == pytest.approx(expected, abs=1e-5)
        assert len(result.gradient_x_input) == len(trace.source_tokens)
        # f(x) is the step's real log-probability
        assert result.log_prob == pytest.approx(trace.steps[step].log_prob, abs=1e-4)
    assert all(p.grad is None for p in parameters)  # the weights' gradients are never touched


def assert_complete(result, relative: float) -> None:
    """Σ integrated gradients ≈ f(x) − f(x′), to ``relative`` of the difference."""
    difference = result.log_prob - result.baseline_log_prob
    tolerance = relative * abs(difference) + 1e-5  # + the rounding of the numbers to 6 digits
    assert sum(result.integrated_gradients) == pytest.approx(difference, abs=tolerance)
    assert result.completeness_gap < tolerance


def test_integrated_gradients_completeness_on_the_model(tiny_translator, trace):
    for step in range(len(trace.steps)):
        assert_complete(interpret.attributions(tiny_translator, trace, step, ig_steps=128), 0.02)


def test_integrated_gradients_completeness_on_the_shipped_model(shipped_translator):
    """A trained model moves far from the baseline (log p from about −11 to 0): still complete."""
    trace = shipped_translator.trace(TEXT)
    result = interpret.attributions(shipped_translator, trace, step=0, ig_steps=128)
    assert result.log_prob - result.baseline_log_prob > 1
    assert_complete(result, 0.02)


def test_integrated_gradients_on_known_functions():
    x = torch.tensor([[1.0, -2.0], [0.5, 3.0]])
    zero = torch.zeros_like(x)

    def linear(batch):  # IG of a linear function (zero baseline) is exactly gradient × input
        return (batch * torch.tensor([[2.0, 1.0], [-1.0, 4.0]])).sum(dim=(1, 2))

    assert torch.allclose(interpret.integrated_gradients(linear, x, zero, steps=3),
                          interpret.gradient_times_input(linear, x))

    def cube(batch):  # Σ x³: attribution of each element is x³ in the limit
        return (batch**3).sum(dim=(1, 2))

    coarse = interpret.integrated_gradients(cube, x, zero, steps=2)
    fine = interpret.integrated_gradients(cube, x, zero, steps=200, batch=64)
    assert torch.allclose(fine, x**3, atol=1e-3)
    assert not torch.allclose(coarse, x**3, atol=1e-3)  # too few steps: visibly off
    assert float(fine.sum()) == pytest.approx(float(cube(x[None]) - cube(zero[None])), abs=1e-3)
