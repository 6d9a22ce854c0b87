"""The Marian adapter (model/adapters/marian.py) against the Hugging Face model itself, on a tiny random
Marian model and SentencePiece vocabularies built in the test (no download)."""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from model.adapters.loading import load_translator
from model.decoding import DecodingOptions, generate
from model.transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from model.translator import CheckpointError, Translator

transformers = pytest.importorskip("transformers")

SENTENCES = ["The cat sits on the mat.", "Where is the station?", "I like green tea.",
             "He gave her a flower because she was sad.", "Zebras quietly juggle xylophones!"]
TOL = 1e-5


@pytest.fixture(scope="module")
def marian(tiny_marian):
    from model.adapters.marian import MarianTranslator

    return MarianTranslator.load(tiny_marian)


@pytest.fixture(scope="module")
def hf(tiny_marian):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.MarianMTModel.from_pretrained(tiny_marian, attn_implementation="eager")
        tokenizer = transformers.MarianTokenizer.from_pretrained(tiny_marian)
    return model.eval(), tokenizer


def to_marian(side, ids: list[int]) -> list[int]:
    return [side.marian_id(i) for i in ids]


def test_source_and_target_ids_are_marians_renumbered(marian, hf):
    _, tokenizer = hf
    for text in SENTENCES:
        ids = marian.english.encode(text)
        assert ids[-1] == EOS_ID
        assert to_marian(marian.english, ids) == tokenizer(text).input_ids
        assert marian.english.tokenize(text) == tokenizer.tokenize(text)
    for text in ["猫坐在垫子上。", "我喜欢绿茶。", "车站在哪里？"]:
        ids = marian.chinese.encode(text, add_eos=True)
        assert to_marian(marian.chinese, ids) == tokenizer(text_target=text).input_ids
        assert len(marian.chinese.characters(text)) == len(marian.chinese.encode(text))
        assert marian.chinese.decode(ids) == tokenizer.decode(
            to_marian(marian.chinese, ids), skip_special_tokens=True)


def test_special_ids_keep_our_convention(marian, hf):
    model, _ = hf
    config = model.config
    vocab = marian.chinese
    assert [vocab.id_to_token(i) for i in (PAD_ID, BOS_ID, EOS_ID, UNK_ID)] == \
        ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert vocab.marian_id(BOS_ID) == config.decoder_start_token_id == config.pad_token_id
    assert vocab.marian_id(EOS_ID) == config.eos_token_id
    assert vocab.vocab_size == config.vocab_size + 1  # the one extra padding row
    assert len(set(vocab.vocabulary)) == vocab.vocab_size  # forcing looks tokens up by name


def test_positions_and_embeddings_equal_marians(marian, hf):
    model, _ = hf
    table = model.model.encoder.embed_positions.weight
    ours = marian.model.src_embedding.positions
    assert ours.shape == table.shape
    torch.testing.assert_close(ours, table, atol=1e-7, rtol=0)
    scale = math.sqrt(model.config.d_model)
    assert marian.model.src_embedding.scale == pytest.approx(scale)
    mapping = torch.tensor(marian.chinese.mapping.to_marian)
    torch.testing.assert_close(marian.model.output.bias, model.final_logits_bias[0, mapping])
    assert marian.model.output.weight is marian.model.src_embedding.tokens.weight  # shared + tied


def _hf_forward(model, src: list[int], decoder: list[int]):
    with torch.no_grad():
        return model(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([decoder]),
                     output_attentions=True)


@pytest.mark.parametrize("text", SENTENCES[:3])
def test_attention_and_logits_equal_hf_output_attentions(marian, hf, text):
    model, _ = hf
    src = marian.english.encode(text)
    decoder = [BOS_ID] + marian.chinese.encode("猫坐在垫子上。")
    out = _hf_forward(model, to_marian(marian.english, src), to_marian(marian.chinese, decoder))
    encoder_record, decoder_record = {}, {}
    with torch.no_grad():
        src_t = torch.tensor([src])
        memory = marian.model.encode(src_t, record=encoder_record)
        logits = marian.model.decode(torch.tensor([decoder]), memory, src_t, record=decoder_record)
    for layer, theirs in enumerate(out.encoder_attentions):
        ours = encoder_record["layers"][layer]["self_attention"]["weights"]
        torch.testing.assert_close(ours, theirs, atol=TOL, rtol=0)
    for layer, (self_theirs, cross_theirs) in enumerate(
            zip(out.decoder_attentions, out.cross_attentions, strict=True)):
        record = decoder_record["layers"][layer]
        torch.testing.assert_close(record["self_attention"]["weights"], self_theirs, atol=TOL, rtol=0)
        torch.testing.assert_close(record["cross_attention"]["weights"], cross_theirs, atol=TOL,
                                   rtol=0)
    torch.testing.assert_close(memory, out.encoder_last_hidden_state, atol=TOL, rtol=0)
    # our logits, read in Marian's order (our <bos> row is Marian's <pad>)
    marian_order = torch.tensor(marian.chinese.ours)
    torch.testing.assert_close(logits[0][:, marian_order], out.logits[0], atol=TOL, rtol=0)


@pytest.mark.parametrize("text", SENTENCES)
def test_greedy_tokens_equal_hf_generate(marian, hf, text):
    model, _ = hf
    steps = 16
    src = marian.english.encode(text)
    with torch.no_grad():
        theirs = model.generate(torch.tensor([to_marian(marian.english, src)]), num_beams=1,
                                do_sample=False, max_new_tokens=steps)[0, 1:].tolist()
    ours = marian.trace(text, DecodingOptions(max_len=steps))
    produced = to_marian(marian.chinese, ours.target_ids) + ([model.config.eos_token_id]
                                                             if ours.finished else [])
    # at its last step generate() forces </s> (forced_eos_token_id); compare the steps before it
    n = min(len(produced), len(theirs) - 1)
    assert produced[:n] == theirs[:n]
    if ours.finished:
        assert produced == theirs[: len(produced)]


@pytest.fixture(scope="module")
def eos_marian(tiny_marian, tmp_path_factory):
    """The tiny Marian model with <eos> made likelier (its final_logits_bias raised), so that beam
    hypotheses end before the length limit as well as at it: ours and Hugging Face's, one folder."""
    import shutil

    from model.adapters.marian import MarianTranslator

    folder = tmp_path_factory.mktemp("marian-eos") / "opus-mt-en-zh-tiny"
    shutil.copytree(tiny_marian, folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.MarianMTModel.from_pretrained(tiny_marian, attn_implementation="eager")
        with torch.no_grad():
            model.final_logits_bias[0, model.config.eos_token_id] += 3.0
        model.save_pretrained(folder)
    model.generation_config.forced_eos_token_id = None  # generate() must not force </s> at the end
    return MarianTranslator.load(folder), model.eval()


def _hf_log_probs(model, src: list[int], decoder: list[int]) -> torch.Tensor:
    """Marian's next-token log-probabilities at every position, with <pad> never written (it is
    our <bos>; generate() bans it too, through bad_words_ids)."""
    logits = _hf_forward(model, src, decoder).logits[0]
    logits[:, model.config.pad_token_id] = -math.inf
    return torch.log_softmax(logits, dim=-1)


def test_beam_search_equals_hf_generate(eos_marian):
    """Beam search on a Marian model gives Hugging Face's beam search result (num_beams = beam size,
    no length penalty: ours is GNMT's ((5 + L) / 6)^α, theirs L^α, equal only at α = 0), for
    hypotheses that end with </s> and ones stopped by the length limit; the score is the sum of
    the path's log-probabilities under Marian's own distribution."""
    marian, model = eos_marian
    ended = 0
    for text in SENTENCES:
        src = to_marian(marian.english, marian.english.encode(text))
        for beam_size in (2, 3, 4):
            ours = marian.trace(text, DecodingOptions(strategy="beam", beam_size=beam_size,
                                                      length_penalty=0.0, max_len=16))
            with torch.no_grad():
                theirs = model.generate(torch.tensor([src]), num_beams=beam_size, length_penalty=0.0,
                                        early_stopping=True, do_sample=False, max_new_tokens=16)
            theirs = [t for t in theirs[0, 1:].tolist() if t != model.config.pad_token_id]
            produced = to_marian(marian.chinese, ours.target_ids) + (
                [model.config.eos_token_id] if ours.finished else [])
            assert produced == theirs, (text, beam_size)
            ended += ours.finished
            # the winner's score: the sum of its log-probabilities under Marian's distribution
            decoder = [model.config.decoder_start_token_id] + produced[:-1]
            log_probs = _hf_log_probs(model, src, decoder)
            total = float(log_probs[torch.arange(len(produced)), torch.tensor(produced)].sum())
            last = max((node for node in ours.beam if node.selected), key=lambda node: node.step)
            assert last.score == pytest.approx(total, abs=1e-3), (text, beam_size)
    assert 0 < ended < 3 * len(SENTENCES)  # both kinds of ending were compared


@pytest.mark.parametrize(("temperature", "top_k", "top_p"),
                         [(0.8, 5, 0.9), (1.3, None, 0.7), (0.5, 3, None), (1.0, None, None)])
def test_sampling_draws_from_hf_logits_warpers_distribution(marian, hf, temperature, top_k, top_p):
    """At every sampled step, the distribution the character was drawn from is the one Hugging
    Face's generate(do_sample=True) draws from: Temperature, then TopK, then TopP warpers on Marian's
    logits (the two random-number generators differ, so the draws themselves are not compared; the
    drawn character must lie in Hugging Face's support)."""
    generation = transformers.generation

    model, _ = hf
    warpers = generation.LogitsProcessorList([generation.TemperatureLogitsWarper(temperature)]
                                  + ([generation.TopKLogitsWarper(top_k)] if top_k else [])
                                  + ([generation.TopPLogitsWarper(top_p)] if top_p else []))
    for seed, text in enumerate(SENTENCES[:3]):
        trace = marian.trace(text, DecodingOptions(strategy="sample", temperature=temperature,
                                                   top_k=top_k, top_p=top_p, seed=seed, max_len=8))
        src = to_marian(marian.english, trace.source_ids)
        prefix = [model.config.decoder_start_token_id]
        for step in trace.steps:
            logits = _hf_forward(model, src, prefix).logits[0, -1:]
            logits[:, model.config.pad_token_id] = -math.inf
            probs = torch.softmax(warpers(torch.tensor([prefix]), logits), dim=-1)[0]
            for candidate in step.top:
                theirs = float(probs[marian.chinese.marian_id(candidate.id)])
                assert candidate.sample_prob == pytest.approx(theirs, abs=1e-3), (text, step.position)
            assert probs[marian.chinese.marian_id(step.id)] > 0
            if len(step.top) > int((probs > 0).sum()):  # every survivor is listed: same support
                assert sum(c.sample_prob > 0 for c in step.top) == int((probs > 0).sum())
            prefix.append(marian.chinese.marian_id(step.id))


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_cached_and_uncached_decoding_agree(marian, strategy):
    for text in SENTENCES[:3]:
        src = torch.tensor([marian.english.encode(text)])
        options = dict(strategy=strategy, max_len=20, beam_size=3, seed=3, temperature=0.9)
        cached = generate(marian.model, src, DecodingOptions(use_cache=True, **options))
        uncached = generate(marian.model, src, DecodingOptions(use_cache=False, **options))
        assert cached.tokens == uncached.tokens
        assert cached.scores == pytest.approx(uncached.scores, abs=1e-4)


def test_trace_forcing_score_and_kv_race(marian, hf):
    model, _ = hf
    text = SENTENCES[0]
    beam = marian.trace(text, DecodingOptions(strategy="beam", beam_size=3, max_len=10))
    assert beam.beam and any(node.selected for node in beam.beam)
    forced = [marian.chinese.id_to_token(marian.chinese.encode("猫")[-1])]
    trace = marian.trace(text, DecodingOptions(max_len=8), forced_prefix=forced)
    assert trace.target_tokens[:1] == forced and trace.steps[0].forced
    json.dumps(trace.to_dict())
    H = marian.config.n_heads
    assert len(trace.encoder) == marian.config.n_encoder_layers
    assert len(trace.encoder[0]["self_attention"]) == H

    race = marian.kv_cache_race(text, 6)
    assert race["identical"]

    reference = "猫坐在垫子上。"
    score = marian.score(text, reference)
    # Marian's own loss on the same pair; ours has one more class (the padding row, a copy of
    # Marian's <pad>), so each position's log-probability is lower by exactly log(1 + p(<pad>))
    src = to_marian(marian.english, marian.english.encode(text))
    labels = marian.chinese.encode(reference, add_eos=True)
    decoder = [BOS_ID] + labels[:-1]
    out = _hf_forward(model, src, to_marian(marian.chinese, decoder))
    log_probs = torch.log_softmax(out.logits[0], dim=-1)
    pad = model.config.pad_token_id
    theirs = -log_probs[torch.arange(len(labels)), torch.tensor(to_marian(marian.chinese, labels))]
    extra = torch.log1p(log_probs[:, pad].exp())
    assert score.cross_entropy == pytest.approx((theirs + extra).tolist(), abs=1e-4)
    assert F.cross_entropy(out.logits[0], torch.tensor(to_marian(marian.chinese, labels))) \
        == pytest.approx(float(theirs.mean()), abs=1e-5)


def test_parameter_counts_are_the_hf_models(marian, hf):
    model, _ = hf
    counts = marian.parameter_counts()
    positions = 2 * model.model.encoder.embed_positions.weight.numel()  # fixed, not trained
    assert counts["total"] == model.num_parameters() - positions
    assert counts["source_embedding"] == model.model.shared.weight.numel()
    assert marian.about["kind"] == "marian"
    assert marian.about["source"]["en"] == "English" and marian.about["target"]["zh"] == "中文"


def test_logit_lens_and_attributions_run(marian):
    from model.explain import interpret

    trace = marian.trace(SENTENCES[0], DecodingOptions(max_len=6))
    lens = interpret.logit_lens(marian, trace)
    assert len(lens) == len(trace.steps)
    attribution = interpret.attributions(marian, trace, 0, ig_steps=4)
    assert attribution is not None


def test_loading_chooses_the_model_and_fails_in_one_line(tiny_marian, tiny_checkpoint, tmp_path,
                                                         monkeypatch):
    from model.adapters.marian import MarianTranslator

    assert isinstance(load_translator(tiny_marian), MarianTranslator)
    ours = load_translator(tiny_checkpoint)
    assert type(ours) is Translator and ours.about["kind"] == "checkpoint"
    for where in (tmp_path / "missing", tmp_path):  # neither our checkpoint nor a Marian folder
        with pytest.raises(CheckpointError, match="no usable checkpoint.*--model with a Hugging Face"):
            load_translator(where)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "marian"}))
    with pytest.raises(CheckpointError, match="missing source.spm, target.spm, vocab.json"):
        load_translator(broken)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    with pytest.raises(CheckpointError, match="huggingface-cli download Helsinki-NLP/opus-mt-xx-yy") \
            as error:
        load_translator("Helsinki-NLP/opus-mt-xx-yy")
    assert "\n" not in str(error.value)
