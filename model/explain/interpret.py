"""Why this character? The logit lens per decoder layer and source attribution per step.

    lens = logit_lens(translator, trace)              # every step: what each decoder layer predicts
    why = attributions(translator, trace, step=2)     # one step: how much each English token counts

Both read a translation that has already been decoded (a ``Trace``, with its recorded pass) and
run the model again only through three public ``Translator`` methods (``output_logits``,
``source_token_embeddings``, ``logits_from_source_embeddings``), so any translator that offers
those three gets both views. They return plain dataclasses: torch stops here.

Logit lens (nostalgebraist, 2020): send each decoder layer's output straight through the real
output path — the output projection (+ bias) and softmax — as if it were the last layer. The last
layer's lens is the model's real distribution. Our model is post-norm: every layer already ends in
LayerNorm, so no extra norm is applied to the intermediate layers (a pre-norm model would apply
its final LayerNorm, which its ``output_logits`` would include).

Source attribution explains f = log p(chosen character at this step) by the source token vectors
(the scaled token embeddings; positions stay as they are):
  gradient × input        Σ_d x_d · ∂f/∂x_d at the real input (one backward pass)
  integrated gradients    Σ_d (x − x′)_d · ∫₀¹ ∂f/∂x_d(x′ + α(x − x′)) dα, with the baseline x′ = 0
                          (Sundararajan, Taly & Yan, 2017); the attributions add up to f(x) − f(x′)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from model.explain.trace import Trace

LENS_TOP = 5  # candidates listed per layer
LENS_COLUMNS = 8  # candidates in the layer × candidate grid


@dataclass
class LensCandidate:
    token: str
    id: int
    prob: float


@dataclass
class LayerLens:
    layer: int  # 0-based decoder layer
    top: list[LensCandidate]  # this layer's most likely next characters
    chosen_prob: float  # probability this layer gives the character finally chosen
    chosen_rank: int  # 1 = this layer's top candidate


@dataclass
class StepLens:
    position: int
    token: str  # the character chosen at this step
    id: int
    layers: list[LayerLens]
    first_top_layer: int | None  # first layer whose top candidate is the chosen one (None: never)
    candidates: list[str]  # the chosen character, then the others any layer ranks in its top
    candidate_ids: list[int]
    grid: list[list[float]]  # [layer][candidate]: each layer's probability for each candidate


@dataclass
class Attribution:
    position: int
    token: str  # the character explained
    id: int
    source_tokens: list[str]
    log_prob: float  # f(x): log p(token) with the real source
    baseline_log_prob: float  # f(x′): log p(token) with every source token vector set to zero
    gradient_x_input: list[float]  # one signed number per source token
    integrated_gradients: list[float]  # one signed number per source token; they sum to ≈ f(x) − f(x′)
    ig_steps: int

    @property
    def completeness_gap(self) -> float:
        """|Σ integrated gradients − (f(x) − f(x′))|: how far the integral's estimate is off."""
        return abs(sum(self.integrated_gradients) - (self.log_prob - self.baseline_log_prob))


# -- logit lens -----------------------------------------------------------------------------------


@torch.inference_mode()
def logit_lens(translator, trace: Trace, top: int = LENS_TOP) -> list[StepLens]:
    """For every step, what each decoder layer would predict if it were the last one."""
    states = trace.recorded.layer_outputs("decoder")  # L × (T, D), from the trace's own pass
    probs = torch.softmax(translator.output_logits(torch.stack(states)).float(), dim=-1)  # (L, T, V)
    best = torch.topk(probs, k=min(top, probs.size(-1)), dim=-1)
    lens = []
    for t, step in enumerate(trace.steps):
        layers = []
        for layer in range(probs.size(0)):
            p = probs[layer, t]
            ids = best.indices[layer, t].tolist()
            layers.append(LayerLens(
                layer=layer,
                top=[LensCandidate(token, i, round(q, 6)) for token, i, q in zip(
                    translator.target_tokens(ids), ids, best.values[layer, t].tolist(), strict=True)],
                chosen_prob=round(float(p[step.id]), 6),
                chosen_rank=int((p > p[step.id]).sum()) + 1,
            ))
        first = next((lay.layer for lay in layers if lay.chosen_rank == 1), None)
        others = {c.id for lay in layers for c in lay.top} - {step.id}
        best_anywhere = probs[:, t].max(dim=0).values
        columns = [step.id, *sorted(others, key=lambda i: -float(best_anywhere[i]))]
        columns = columns[:LENS_COLUMNS]
        grid = [[round(float(q), 6) for q in probs[layer, t, columns]] for layer in range(probs.size(0))]
        lens.append(StepLens(t, step.token, step.id, layers, first,
                             translator.target_tokens(columns), columns, grid))
    return lens


# -- attribution ----------------------------------------------------------------------------------


def gradient_times_input(f: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """x ⊙ ∂f/∂x at x. ``f`` maps a batch (B, *x.shape) to one number per item (B,)."""
    point = x.detach()[None].clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(f(point).sum(), point)
    return x.detach() * grad[0]


def integrated_gradients(
    f: Callable[[Tensor], Tensor], x: Tensor, baseline: Tensor, steps: int = 32, batch: int = 32
) -> Tensor:
    """(x − x′) ⊙ ∫₀¹ ∂f/∂x(x′ + α(x − x′)) dα, the integral by the midpoint rule over ``steps``.

    Along the straight path from the baseline x′ to x the gradient is averaged, so by the
    fundamental theorem of calculus the attributions add up to f(x) − f(x′) (completeness) as the
    steps grow. ``f`` maps a batch (B, *x.shape) to one number per item (B,); the path is fed
    ``batch`` points at a time. Written out here instead of taken from Captum, which would pull
    matplotlib into the locked install for these few lines.
    """
    x, baseline = x.detach(), baseline.detach()
    alphas = (torch.arange(steps, dtype=x.dtype) + 0.5) / steps  # midpoints of equal slices
    total = torch.zeros_like(x)
    for chunk in alphas.split(batch):
        path = baseline + chunk.view(-1, *[1] * x.dim()) * (x - baseline)  # (b, *x.shape)
        path.requires_grad_(True)
        (grads,) = torch.autograd.grad(f(path).sum(), path)  # items are independent: per-item grads
        total += grads.sum(dim=0)
    return (x - baseline) * total / steps


def attributions(translator, trace: Trace, step: int, ig_steps: int = 32) -> Attribution:
    """How much each source token contributed to log p(the character chosen at ``step``)."""
    chosen = trace.steps[step]
    prefix = trace.decoder_ids[: step + 1]  # the decoder is causal: later characters cannot matter

    def f(embeddings: Tensor) -> Tensor:  # (B, S, D) → (B,): log p(chosen) at this step
        logits = translator.logits_from_source_embeddings(embeddings, trace.source_ids, prefix)
        return torch.log_softmax(logits[:, step].float(), dim=-1)[:, chosen.id]

    with torch.enable_grad():
        # autograd.grad with respect to the inputs only: the weights' .grad is never touched
        x = translator.source_token_embeddings(trace.source_ids).detach()  # (S, D)
        baseline = torch.zeros_like(x)
        gxi = gradient_times_input(f, x).sum(dim=-1)  # (S,)
        ig = integrated_gradients(f, x, baseline, ig_steps).sum(dim=-1)  # (S,)
    with torch.inference_mode():
        ends = f(torch.stack([x, baseline]))
    return Attribution(
        position=step,
        token=chosen.token,
        id=chosen.id,
        source_tokens=list(trace.source_tokens),
        log_prob=round(float(ends[0]), 6),
        baseline_log_prob=round(float(ends[1]), 6),
        gradient_x_input=[round(float(v), 6) for v in gxi],
        integrated_gradients=[round(float(v), 6) for v in ig],
        ig_steps=ig_steps,
    )
