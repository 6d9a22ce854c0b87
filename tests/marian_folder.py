"""A tiny Hugging Face Marian model, written as a Hugging Face folder (no download).

SentencePiece models are trained here on the tiny sentences of tests/conftest.py; the model is a
``MarianMTModel`` from a ``MarianConfig`` with random weights (or briefly taught the pairs below),
in the files a real opus-mt folder has (config.json, model.safetensors, source.spm, target.spm,
vocab.json, tokenizer_config.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

ENGLISH = [
    "The cat sits on the mat.", "The dog runs in the park.", "I like green tea.",
    "She reads a book every day.", "We are students.", "Where is the station?",
    "The weather is nice today.", "He gave her a flower because she was sad.",
    "The woman said that she was tired.", "The lights are on in the hall.",
]
CHINESE = [
    "猫坐在垫子上。", "狗在公园里跑。", "我喜欢绿茶。", "她每天读一本书。", "我们是学生。",
    "车站在哪里？", "今天天气很好。", "他给了她一朵花，因为她很难过。", "那个女人说她累了。",
    "大厅里的灯亮着。",
]


def _train_spm(lines: list[str], prefix: Path, vocab_size: int) -> Path:
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines * 4), model_prefix=str(prefix), vocab_size=vocab_size,
        model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
        minloglevel=2, num_threads=1,
    )
    return prefix.with_suffix(".model")


def make_tiny_marian(path: Path, seed: int = 0, learn_steps: int = 0, **overrides) -> Path:
    """Write a tiny Marian model (d_model 16, 2+2 layers, 2 heads, SiLU) to ``path``: random, or
    after ``learn_steps`` Adam steps on the ten pairs above (then, like a real model, it ends its
    translations within a few tokens; a random one runs each to max_len)."""
    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    torch.manual_seed(seed)
    path.mkdir(parents=True, exist_ok=True)
    work = path.parent / f"{path.name}-spm"
    work.mkdir(exist_ok=True)
    source_spm = _train_spm(ENGLISH, work / "source", 60)
    target_spm = _train_spm(CHINESE, work / "target", 90)
    # Marian's joint vocabulary: </s>=0, <unk>=1, every piece of both sides, <pad> last
    vocab = {"</s>": 0, "<unk>": 1}
    for model_file in (source_spm, target_spm):
        processor = spm.SentencePieceProcessor(model_file=str(model_file))
        for i in range(processor.get_piece_size()):
            piece = processor.id_to_piece(i)
            if piece not in ("<unk>", "<s>", "</s>") and piece not in vocab:
                vocab[piece] = len(vocab)
    vocab["<pad>"] = len(vocab)
    (work / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    tokenizer = MarianTokenizer(source_spm=str(source_spm), target_spm=str(target_spm),
                                vocab=str(work / "vocab.json"), source_lang="en", target_lang="zh")
    size = len(vocab)
    settings = dict(
        vocab_size=size, decoder_vocab_size=size, d_model=16, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
        decoder_ffn_dim=32, activation_function="swish", max_position_embeddings=256,
        pad_token_id=size - 1, eos_token_id=0, decoder_start_token_id=size - 1,
        forced_eos_token_id=0, bad_words_ids=[[size - 1]], scale_embedding=True,
        share_encoder_decoder_embeddings=True, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, init_std=0.3, num_beams=1,
    )
    settings.update(overrides)
    model = MarianMTModel(MarianConfig(**settings)).eval()
    with torch.no_grad():  # a non-zero output bias, so the tests see it carried over
        model.final_logits_bias.normal_(0.0, 0.5)
    if learn_steps:
        batch = tokenizer(ENGLISH, text_target=CHINESE, padding=True, return_tensors="pt")
        batch["labels"][batch["labels"] == tokenizer.pad_token_id] = -100  # no loss on padding
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        model.train()
        for _ in range(learn_steps):
            loss = model(**batch).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
