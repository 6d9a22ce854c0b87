"""Teacher-forced scoring of one (source, reference) pair for the /training page: the loss per
position and the gradient one update would start from, with no update made."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from model.explain.trace import _round
from model.transformer import BOS_ID, EOS_ID


@dataclass
class Score:
    """Teacher-forced scoring of one (source, reference) pair: one backward pass, no update."""

    source_tokens: list[str]
    decoder_input: list[str]  # <bos> + reference
    labels: list[str]  # reference + <eos>: the decoder input shifted left by one
    predicted: list[str]  # the model's most likely token at each position (teacher forcing)
    label_prob: list[float]  # probability the model gave to the right label
    cross_entropy: list[float]  # -log p(label), per position
    smoothed_cross_entropy: list[float]  # with label smoothing, per position
    loss: float  # mean cross-entropy
    smoothed_loss: float
    label_smoothing: float
    grad_norm: float  # gradient norm of the smoothed loss, before clipping
    clipped_grad_norm: float  # after clipping to ``clip``
    clip: float
    unknown_characters: list[str]


def teacher_forced_score(translator, src_list: list[int], reference: str, reference_ids: list[int],
                         label_smoothing: float = 0.1, clip: float = 1.0) -> Score:
    """Teacher-forced loss of a pair and the gradient it would produce (no weight update): the
    source's ids and the reference's, which ``Translator.score`` checked."""
    unknown = [
        ch for ch, i in zip(translator.chinese.characters(reference), reference_ids, strict=True)
        if i == translator.chinese.index["<unk>"]
    ]
    decoder_ids = [BOS_ID, *reference_ids]
    label_ids = [*reference_ids, EOS_ID]
    src = torch.tensor([src_list])
    labels = torch.tensor(label_ids)
    parameters = [p for p in translator.model.parameters() if p.requires_grad]
    with torch.enable_grad():
        logits = translator.model(src, torch.tensor([decoder_ids]))[0]
        per_token = F.cross_entropy(logits, labels, reduction="none")
        smoothed = F.cross_entropy(
            logits, labels, reduction="none", label_smoothing=label_smoothing
        )
        # autograd.grad leaves every parameter's .grad untouched, so concurrent requests
        # cannot mix their gradients and the model is never changed.
        grads = torch.autograd.grad(smoothed.mean(), parameters)
    grad_norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))
    clipped = grad_norm * min(1.0, clip / (grad_norm + 1e-6))
    probs = torch.softmax(logits.detach(), dim=-1)
    return Score(
        source_tokens=translator.source_tokens(src_list),
        decoder_input=translator.target_tokens(decoder_ids),
        labels=translator.target_tokens(label_ids),
        predicted=translator.target_tokens(probs.argmax(dim=-1).tolist()),
        label_prob=_round(probs[torch.arange(len(label_ids)), labels], 6),
        cross_entropy=_round(per_token.detach(), 5),
        smoothed_cross_entropy=_round(smoothed.detach(), 5),
        loss=round(per_token.mean().item(), 5),
        smoothed_loss=round(smoothed.mean().item(), 5),
        label_smoothing=label_smoothing,
        grad_norm=round(grad_norm, 5),
        clipped_grad_norm=round(clipped, 5),
        clip=clip,
        unknown_characters=unknown,
    )
