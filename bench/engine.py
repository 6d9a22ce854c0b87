"""Our traced translation against a real inference engine (CTranslate2) on the same weights.

    python -m bench.engine [--checkpoint DIR] [--sentences 20] [--repeats 3]

Converts the checkpoint to CTranslate2 float32 (in a temporary folder), then times, interleaved
in one process and one thread each, for the same unseen ~10-word sentences:

- ``trace``     — Translator.trace(): the translation plus everything the pages show,
- ``translate`` — Translator.translate() (the same trace, as the app runs it),
- ``decode``    — model.decoding.generate() alone: the tokens, nothing recorded,
- ``ct2``       — CTranslate2 ``translate_batch`` with the same strategy,

for greedy and for beam 4, and prints p50/p90, the ratios to CTranslate2, and whether every
output is identical token for token.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench.common import machine, percentiles, sentences
from model.decoding import DecodingOptions, generate
from model.transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from model.translator import DEFAULT_CHECKPOINT, Translator


def ctranslate2_spec(translator: Translator):
    """Our weights as a CTranslate2 post-norm Transformer: same tensors, same vocabularies."""
    from ctranslate2.specs import common_spec, transformer_spec

    model, config = translator.model, translator.config
    spec = transformer_spec.TransformerSpec.from_config(
        (config.n_encoder_layers, config.n_decoder_layers), config.n_heads, pre_norm=False,
        activation=common_spec.Activation.RELU,
    )

    def numpy(tensor: torch.Tensor) -> np.ndarray:
        return tensor.detach().float().numpy().copy()

    def linear(target, *modules) -> None:  # several modules: fused along the output dimension
        target.weight = numpy(torch.cat([m.weight for m in modules]))
        target.bias = numpy(torch.cat([m.bias for m in modules]))

    def norm(target, module) -> None:
        target.gamma, target.beta = numpy(module.weight), numpy(module.bias)

    def embeddings(target, table, embedding) -> None:
        table.weight = numpy(embedding.tokens.weight)
        target.scale_embeddings = True
        target.position_encodings.encodings = numpy(embedding.positions)

    embeddings(spec.encoder, spec.encoder.embeddings[0], model.src_embedding)
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder_layers, strict=True):
        attention = layer.self_attention
        linear(layer_spec.self_attention.linear[0], attention.w_q, attention.w_k, attention.w_v)
        linear(layer_spec.self_attention.linear[1], attention.w_o)
        norm(layer_spec.self_attention.layer_norm, layer.add_norm1.norm)
        linear(layer_spec.ffn.linear_0, layer.ffn.linear1)
        linear(layer_spec.ffn.linear_1, layer.ffn.linear2)
        norm(layer_spec.ffn.layer_norm, layer.add_norm2.norm)
    embeddings(spec.decoder, spec.decoder.embeddings, model.tgt_embedding)
    linear(spec.decoder.projection, model.output)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder_layers, strict=True):
        own, cross = layer.self_attention, layer.cross_attention
        linear(layer_spec.self_attention.linear[0], own.w_q, own.w_k, own.w_v)
        linear(layer_spec.self_attention.linear[1], own.w_o)
        norm(layer_spec.self_attention.layer_norm, layer.add_norm1.norm)
        linear(layer_spec.attention.linear[0], cross.w_q)
        linear(layer_spec.attention.linear[1], cross.w_k, cross.w_v)
        linear(layer_spec.attention.linear[2], cross.w_o)
        norm(layer_spec.attention.layer_norm, layer.add_norm2.norm)
        linear(layer_spec.ffn.linear_0, layer.ffn.linear1)
        linear(layer_spec.ffn.linear_1, layer.ffn.linear2)
        norm(layer_spec.ffn.layer_norm, layer.add_norm3.norm)

    english = [translator.english.id_to_token(i) for i in range(translator.english.vocab_size)]
    chinese = [translator.chinese.id_to_token(i) for i in range(translator.chinese.vocab_size)]
    spec.register_source_vocabulary(english)
    spec.register_target_vocabulary(chinese)
    spec.config.bos_token = chinese[BOS_ID]
    spec.config.eos_token = chinese[EOS_ID]
    spec.config.unk_token = chinese[UNK_ID]
    spec.config.decoder_start_token = chinese[BOS_ID]
    spec.config.add_source_bos = False
    spec.config.add_source_eos = False  # our source ids already end in <eos>
    spec.config.layer_norm_epsilon = model.encoder_layers[0].add_norm1.norm.eps
    return spec


def convert(translator: Translator, folder: Path) -> Path:
    """Write the checkpoint as a CTranslate2 float32 model into ``folder``."""
    from ctranslate2.converters.converter import Converter

    class OurCheckpoint(Converter):
        def _load(self):
            return ctranslate2_spec(translator)

    return Path(OurCheckpoint().convert(str(folder), force=True))


def ct2_decode(engine, translator: Translator, text: str, options: DecodingOptions) -> list[int]:
    """CTranslate2's tokens for ``text`` under the same strategy (greedy or beam) and limits."""
    chinese = translator.chinese
    beam = options.beam_size if options.strategy == "beam" else 1
    result = engine.translate_batch(
        [translator.source_tokens(translator.source_ids(text))], beam_size=beam,
        max_decoding_length=options.max_len, length_penalty=options.length_penalty if beam > 1 else 0,
        suppress_sequences=[[chinese.id_to_token(PAD_ID)], [chinese.id_to_token(BOS_ID)]],
    )
    return [chinese.index[token] for token in result[0].hypotheses[0]]


def compare(translator: Translator, engine, texts: list[str], options: DecodingOptions,
            repeats: int) -> dict:
    """Every path on every sentence, interleaved (trace, translate, decode, ct2, trace, …)."""
    paths = {
        "trace": lambda text, src: translator.trace(text, options),
        "translate": lambda text, src: translator.translate(text, options),
        "decode": lambda text, src: generate(translator.model, src, options),
        "ct2": lambda text, src: ct2_decode(engine, translator, text, options),
    }
    for text in texts[:3]:  # warm-up
        for path in paths.values():
            path(text, torch.tensor([translator.source_ids(text)]))
    times: dict[str, list[float]] = {name: [] for name in paths}
    identical = 0
    for text in texts:
        src = torch.tensor([translator.source_ids(text)])
        identical += translator.trace(text, options).target_ids == ct2_decode(
            engine, translator, text, options)
        for _ in range(repeats):
            for name, path in paths.items():
                started = time.perf_counter()
                path(text, src)
                times[name].append((time.perf_counter() - started) * 1000)
    return {"identical": identical, "sentences": len(texts),
            "stats": {name: percentiles(values) for name, values in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per sentence and path")
    args = parser.parse_args()

    import ctranslate2

    torch.set_num_threads(1)
    translator = Translator.load(args.checkpoint)
    texts = sentences(10, args.sentences, offset=4242)
    print("machine:", machine())
    with tempfile.TemporaryDirectory() as tmp:
        engine = ctranslate2.Translator(str(convert(translator, Path(tmp) / "ct2")), device="cpu",
                                        compute_type="float32", intra_threads=1, inter_threads=1)
        for label, options in (
            ("greedy", DecodingOptions()),
            ("beam 4, length penalty 0.6 (the app's default)",
             DecodingOptions(strategy="beam", beam_size=4)),
            ("beam 4, no length penalty", DecodingOptions(strategy="beam", beam_size=4,
                                                          length_penalty=0.0)),
        ):
            result = compare(translator, engine, texts, options, args.repeats)
            stats = result["stats"]
            base = stats["ct2"]
            print(f"\n{label}: {result['sentences']} sentences × {args.repeats} runs, one thread; "
                  f"identical outputs {result['identical']}/{result['sentences']}")
            for name, s in stats.items():
                print(f"  {name:<10} p50 {s['p50']:7.2f} ms  p90 {s['p90']:7.2f} ms   "
                      f"p50 {s['p50'] / base['p50']:4.2f}×  p90 {s['p90'] / base['p90']:4.2f}× "
                      "CTranslate2")


if __name__ == "__main__":
    main()
