"""A Marian model the size of Helsinki-NLP/opus-mt-en-zh, with random weights, through the adapter.

    python -m bench.marian_bench [--repeats 9] [--keep DIR]

Builds a ``MarianMTModel`` with opus-mt-en-zh's exact configuration (d_model 512, 6 + 6 layers,
8 heads, d_ff 2048, SiLU, 512 positions, a shared 65,001-row vocabulary), with SentencePiece models
trained here on a few sentences (the real ones cannot be downloaded) and the vocabulary filled up
to 65,001 rows, saves it as a Hugging Face folder, then in a fresh process loads it with
``python -m app``'s loader and reports: load time, peak and settled memory (RSS), the full trace
(every layer, head and step) of a 10-word sentence at 1 and 2 torch threads, and the size of what
the pages receive (the trace as JSON, gzipped; the x-ray payload with the vocabulary and step
logits). A random model never ends its translation, so decoding is capped at ``--steps`` (16,
about what a 10-word sentence needs).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import clauses

OPUS_MT_EN_ZH = dict(  # config.json of Helsinki-NLP/opus-mt-en-zh
    vocab_size=65001, decoder_vocab_size=65001, d_model=512, encoder_layers=6, decoder_layers=6,
    encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
    decoder_ffn_dim=2048, activation_function="swish", max_position_embeddings=512,
    pad_token_id=65000, eos_token_id=0, decoder_start_token_id=65000, forced_eos_token_id=0,
    bad_words_ids=[[65000]], scale_embedding=True, share_encoder_decoder_embeddings=True,
    dropout=0.1, attention_dropout=0.0, activation_dropout=0.0, num_beams=4, max_length=512,
)
LINES_EN = ["The teacher reads a book in the kitchen every morning.", "Where is the station?",
            "The doctor reads a book in the kitchen every morning.",
            "My brother buys some tea at the station every evening.", "I like green tea.",
            "The woman said that she was tired.", "Our neighbor finds the map in the park."]
LINES_ZH = ["老师每天早上在厨房里读书。", "车站在哪里？", "我哥哥每天晚上在车站买茶。", "我喜欢绿茶。",
            "那个女人说她累了。", "我们的邻居在公园里找到了地图。"]
SENTENCE = "The teacher reads a book in the kitchen every morning."  # 10 words


def build(folder: Path) -> Path:
    """Write the random opus-mt-en-zh-sized model and its tokenizer files to ``folder``."""
    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    torch.manual_seed(0)
    folder.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="marian-spm-"))
    models = []
    # English: bench/common.py's generated sentences and BPE, so that words stay whole pieces as
    # in the real 32k-piece model (a 10-word sentence → a dozen pieces, as with opus-mt-en-zh)
    english = LINES_EN + [s + "." for s in clauses(True)][::7][:3000]
    for name, lines, size, kind in (("source", english, 300, "bpe"),
                                    ("target", LINES_ZH * 8, 200, "unigram")):
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_prefix=str(work / name), vocab_size=size,
            model_type=kind,
            character_coverage=1.0, hard_vocab_limit=False, minloglevel=2, num_threads=1)
        models.append(work / f"{name}.model")
    vocab = {"</s>": 0, "<unk>": 1}
    for model_file in models:
        processor = spm.SentencePieceProcessor(model_file=str(model_file))
        for i in range(processor.get_piece_size()):
            piece = processor.id_to_piece(i)
            if piece not in ("<unk>", "<s>", "</s>") and piece not in vocab:
                vocab[piece] = len(vocab)
    while len(vocab) < 65000:  # the real vocabulary's size; these rows are never produced by spm
        vocab[f"▁filler{len(vocab)}"] = len(vocab)
    vocab["<pad>"] = 65000
    (work / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    tokenizer = MarianTokenizer(source_spm=str(models[0]), target_spm=str(models[1]),
                                vocab=str(work / "vocab.json"), source_lang="eng",
                                target_lang="zho")
    model = MarianMTModel(MarianConfig(**OPUS_MT_EN_ZH))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident memory of this process in MB, from /proc/self/status."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines()
                  if ":" in line)
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def measure(folder: Path, repeats: int, steps: int) -> dict:
    """Load the folder as the app does and time full traces (runs in its own process)."""
    import gc

    import orjson
    import torch

    from model.adapters.loading import load_translator
    from model.decoding import DecodingOptions

    torch.set_num_threads(1)
    started = time.perf_counter()
    translator = load_translator(folder)
    gc.collect()
    load_s = time.perf_counter() - started
    after_load = rss_mb()
    options = DecodingOptions(max_len=steps)
    result = {"load_s": round(load_s, 2), "rss_after_load_mb": round(after_load[0]),
              "peak_rss_during_load_mb": round(after_load[1]), "words": len(SENTENCE.split()),
              "source_tokens": len(translator.english.encode(SENTENCE)), "steps": steps,
              "parameters": translator.parameter_counts()["total"]}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        translator.trace(SENTENCE, options)  # warm-up
        times = []
        for i in range(repeats):
            # distinct sentences: nothing is cached inside the translator, but keep the length
            text = SENTENCE if i % 2 == 0 else SENTENCE.replace("teacher", "doctor")
            begun = time.perf_counter()
            trace = translator.trace(text, options)
            times.append((time.perf_counter() - begun) * 1000)
        times.sort()
        result[f"trace_p50_ms_{threads}t"] = round(statistics.median(times), 1)
        result[f"trace_p90_ms_{threads}t"] = round(times[int(0.9 * (len(times) - 1))], 1)
    payload = orjson.dumps(trace.to_dict())
    result["trace_json_kb"] = round(len(payload) / 1024)
    result["trace_gzip_kb"] = round(len(gzip.compress(payload, 6)) / 1024)
    # what /api/xray sends besides the stages: the whole target vocabulary and every step's logits
    with torch.inference_mode():
        src = torch.tensor([trace.source_ids])
        ids = torch.tensor([[1, *trace.target_ids][: len(trace.decoder_input)]])
        logits = translator.model.decode(ids, translator.model.encode(src), src)[0]
    xray = orjson.dumps({"vocab": translator.chinese.vocabulary, "logits": base64.b64encode(
        logits[: len(trace.steps)].float().numpy().astype("<f4").tobytes()).decode()})
    result["xray_vocab_logits_kb"] = round(len(xray) / 1024)
    result["xray_vocab_logits_gzip_kb"] = round(len(gzip.compress(xray, 6)) / 1024)
    result["rss_after_traces_mb"], result["peak_rss_mb"] = (round(x) for x in rss_mb())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed traces per thread count")
    parser.add_argument("--steps", type=int, default=16, help="decoding steps (max_len)")
    parser.add_argument("--keep", type=Path, help="write the model folder here and keep it")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.repeats, args.steps)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch) / "opus-mt-en-zh-random"
        if not (folder / "model.safetensors").is_file():
            started = time.perf_counter()
            build(folder)
            print(f"built {folder} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        child = subprocess.run(
            [sys.executable, "-m", "bench.marian_bench", "--measure", str(folder),
             "--repeats", str(args.repeats), "--steps", str(args.steps)],
            capture_output=True, text=True, check=True)
        figures = json.loads(child.stdout.strip().splitlines()[-1])
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
