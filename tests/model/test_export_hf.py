"""The shipped checkpoint exported as a Hugging Face Marian folder (model/adapters/export_hf.py),
checked against our own model: transformers' greedy ``generate`` gives our greedy tokens, its
``output_attentions`` are our attention weights and its tokenizers cut text exactly as ours do
(tests/app/test_export_app.py serves the folder with ``--model``)."""

from __future__ import annotations

import csv
import json
import warnings

import pytest
import torch
from safetensors.torch import load_file

from model.decoding import DecodingOptions, generate
from model.explain.record import RecordedPass
from model.training.loop import state_for_saving
from model.transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Transformer
from tests.conftest import SHIPPED_CHECKPOINT

transformers = pytest.importorskip("transformers")
torch.set_num_threads(1)  # the tests share the machine with other work (as tests/app do)

PROBE = SHIPPED_CHECKPOINT.parent / "training" / "probe.tsv"
HELD_OUT = SHIPPED_CHECKPOINT.parent / "training" / "heldout_tatoeba_100.tsv"
# measured ≤ 1.1e-6 and ≤ 1.1e-5 on these sentences: the same weights, summed in another order, and
# Marian's position table, computed in float64 (at most 1.4e-5 from ours)
ATTENTION_TOL = 1e-5
LOGIT_TOL = 1e-4
# what tokenizers trip over: case, accents, full-width and compatibility forms, digits, every
# kind of space, tokens that look special, emoji, Chinese in English and English in Chinese
ODD_ENGLISH = [
    "", "   ", "HELLO World!", "naïve café — déjà vu", "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ １２３", "ﬁne ① ²",
    "It costs $1,234.56 (or 9%).", "don't, can't; won't: 'quoted' \"double\"", "a\tb\nc\u3000d\u00a0e",
    "snake_case and kebab-case", "<unk> <pad> <eos> <bos> are literal here", "emoji 🙂🚀 and 猫 cat",
    "x\u0301 combining", "\x1c\x1f control-ish spaces", "3.14159 2026-12-01 12:30",
]
ODD_CHINESE = [
    "", "猫坐在垫子上。", "他说：“你好！”", "１２３ＡＢＣ", "Hello, World?", "<unk><pad>",
    "空 格\t制\n表\u3000全角\u00a0不换行", "\x1c\x1d\x1e\x1f分隔", "生僻字：龘靐齉", "🙂表情", "ｱｲｳ①ﬁ",
    "x\u0301", "；：！？，",
]


def _tsv(path, column: str) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return [row[column] for row in csv.DictReader(handle, delimiter="\t")]


SENTENCES = _tsv(PROBE, "english")[::5][:20]  # two from each of ten categories of the probe set


@pytest.fixture(scope="module")
def hf_model(hf_export):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.MarianMTModel.from_pretrained(hf_export, attn_implementation="eager")
    return model.eval()


@pytest.fixture(scope="module")
def tokenizers(hf_export):
    """(English, Chinese, the English-in Chinese-out one) as AutoTokenizer loads them."""
    auto = transformers.AutoTokenizer
    return (auto.from_pretrained(hf_export), auto.from_pretrained(hf_export, subfolder="target"),
            auto.from_pretrained(hf_export, trust_remote_code=True))


def test_the_folder_is_a_marian_model_with_our_ids(hf_export, hf_model, shipped_translator):
    names = {p.name for p in hf_export.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
            "tokenizer_config.json", "README.md", "target"} <= names
    assert not any(name.endswith((".bin", ".pt", ".pkl")) for name in names)
    config = json.loads((hf_export / "config.json").read_text(encoding="utf-8"))
    ours = shipped_translator.config
    assert config["model_type"] == "marian" and config["architectures"] == ["MarianMTModel"]
    assert (config["vocab_size"], config["decoder_vocab_size"]) == (ours.src_vocab_size,
                                                                   ours.tgt_vocab_size)
    assert config["share_encoder_decoder_embeddings"] is False and config["tie_word_embeddings"]
    assert config["activation_function"] == "relu" and config["scale_embedding"] is True
    assert (config["pad_token_id"], config["decoder_start_token_id"], config["eos_token_id"]) == \
        (PAD_ID, BOS_ID, EOS_ID)
    assert config["forced_eos_token_id"] is None
    assert config["inside_transformer"]["position_layout"] == "interleaved"
    generation = json.loads((hf_export / "generation_config.json").read_text(encoding="utf-8"))
    assert generation["suppress_tokens"] == [PAD_ID, BOS_ID]  # our mask_special
    assert generation["max_length"] == DecodingOptions().max_len + 1
    weights = load_file(str(hf_export / "model.safetensors"))
    assert all(torch.isfinite(t).all() for t in weights.values())  # no −inf stands in for masking
    torch.testing.assert_close(hf_model.final_logits_bias[0], shipped_translator.model.output.bias,
                               rtol=0, atol=0)
    assert hf_model.lm_head.weight.data_ptr() == hf_model.model.decoder.embed_tokens.weight.data_ptr()


def test_permuting_the_hidden_dimension_keeps_the_function(tiny_translator):
    from model.adapters.export_hf import from_marian_order, hidden_order, to_marian_order

    assert hidden_order(6).tolist() == [0, 2, 4, 1, 3, 5]
    model = tiny_translator.model
    permuted = to_marian_order(model)
    assert permuted.config.position_layout == "halves"
    # our interleaved table, read in Marian's order, is Marian's [sin…, cos…] table
    order = hidden_order(model.config.d_model)
    torch.testing.assert_close(model.src_embedding.positions[:, order],
                               permuted.src_embedding.positions, atol=1e-5, rtol=0)
    src = torch.tensor([tiny_translator.english.encode("The cat sits on the mat.")])
    tgt = torch.tensor([[BOS_ID] + tiny_translator.chinese.encode("猫坐在垫子上。")])
    with torch.no_grad():
        torch.testing.assert_close(permuted(src, tgt), model(src, tgt), atol=1e-5, rtol=0)
    back = from_marian_order(permuted)
    assert all(torch.equal(a, b) for a, b in zip(state_for_saving(back).values(),
                                                 state_for_saving(model).values(), strict=True))


def test_every_parameter_has_a_rule(shipped_translator):
    from model.adapters.export_hf import _axis

    for name in Transformer(shipped_translator.config).state_dict():
        _axis(name)  # raises for a parameter the permutation would not know how to move
    with pytest.raises(ValueError, match="no hidden-dimension rule"):
        _axis("encoder_layers.0.new_gate.weight")


def test_greedy_generate_gives_our_tokens_on_20_sentences(hf_model, tokenizers, shipped_translator):
    english, chinese, _ = tokenizers
    model = shipped_translator.model
    assert len(SENTENCES) == 20
    for text in SENTENCES:
        src = english(text, return_tensors="pt").input_ids
        assert src[0].tolist() == shipped_translator.english.encode(text)
        with torch.no_grad():
            theirs = hf_model.generate(src)[0].tolist()  # the folder's own generation config
        ours = generate(model, src, DecodingOptions())
        assert theirs[0] == BOS_ID
        assert theirs[1:] == ours.tokens + ([EOS_ID] if ours.finished else []), text
        assert chinese.decode(theirs, skip_special_tokens=True) == \
            shipped_translator.chinese.decode(ours.tokens)


@pytest.mark.parametrize("text", SENTENCES[:3])
def test_output_attentions_equal_ours(hf_model, shipped_translator, text):
    model = shipped_translator.model
    src = shipped_translator.english.encode(text)
    decoder = [BOS_ID, *generate(model, torch.tensor([src]), DecodingOptions()).tokens]
    recorded = RecordedPass.run(model, src, decoder)
    with torch.no_grad():
        out = hf_model(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([decoder]),
                       output_attentions=True)
    n = model.config.n_encoder_layers
    assert len(out.encoder_attentions) == len(out.decoder_attentions) == len(out.cross_attentions) == n
    for layer in range(n):
        for theirs, side, sublayer in ((out.encoder_attentions, "encoder", "self_attention"),
                                       (out.decoder_attentions, "decoder", "self_attention"),
                                       (out.cross_attentions, "decoder", "cross_attention")):
            ours = recorded.attention(side, layer, sublayer)["weights"]
            assert ours.shape == theirs[layer].shape  # (1, heads, query, key)
            torch.testing.assert_close(theirs[layer], ours, atol=ATTENTION_TOL, rtol=0)
    torch.testing.assert_close(out.logits, recorded.decoder["logits"], atol=LOGIT_TOL, rtol=0)


def test_the_english_tokenizer_is_ours(hf_export, tokenizers, shipped_translator):
    """The same tokenizers pipeline (the JSON differs only by the <eos> it appends), and the same
    ids, pieces and decoded text on the probe set, 100 held-out sentences and odd inputs."""
    english, _, pair = tokenizers
    ours = shipped_translator.english
    written = json.loads((hf_export / "tokenizer.json").read_text(encoding="utf-8"))
    original = json.loads(ours.tokenizer.to_str())  # as loaded: its special tokens registered
    assert written.pop("post_processor")["type"] == "TemplateProcessing"
    original.pop("post_processor")
    assert written == original
    assert (english.pad_token_id, english.bos_token_id, english.eos_token_id,
            english.unk_token_id) == (PAD_ID, BOS_ID, EOS_ID, UNK_ID)
    texts = _tsv(PROBE, "english") + _tsv(HELD_OUT, "english") + ODD_ENGLISH
    for text in texts:
        ids = ours.encode(text)
        assert english(text).input_ids == ids == pair(text).input_ids, text
        assert english.convert_ids_to_tokens(ids[:-1]) == ours.tokenize(text)
        assert english.decode(ids, skip_special_tokens=True) == ours.decode(ids)
        assert pair.decode(ids, skip_special_tokens=True, use_source_tokenizer=True) == ours.decode(ids)
    batch = english(texts[:4], padding=True).input_ids  # batches pad with our <pad>
    assert all(row[len(ours.encode(t)):] == [PAD_ID] * (len(row) - len(ours.encode(t)))
               for row, t in zip(batch, texts[:4], strict=True))


def test_the_chinese_tokenizer_is_ours(tokenizers, shipped_translator):
    """One id per character after NFKC, exactly the spaces ``str.isspace`` drops, <unk> for the
    rest, <eos> at the end; decoding gives our text — on every reference, the whole vocabulary and
    odd inputs."""
    _, chinese, pair = tokenizers
    ours = shipped_translator.chinese
    texts = (_tsv(PROBE, "chinese") + _tsv(HELD_OUT, "chinese") + ODD_CHINESE
             + ["".join(ours.vocabulary[4:])])
    for text in texts:
        ids = ours.encode(text, add_eos=True)
        assert chinese(text).input_ids == ids == pair(text_target=text).input_ids, text
        assert chinese.convert_ids_to_tokens(ids) == pair.convert_ids_to_tokens(ids) == \
            [ours.id_to_token(i) for i in ids]
        assert chinese.decode(ids, skip_special_tokens=True) == ours.decode(ids) == \
            pair.decode([BOS_ID, *ids], skip_special_tokens=True) == \
            pair.convert_tokens_to_string([ours.id_to_token(i) for i in ids if i > UNK_ID])
    # the English-in, Chinese-out tokenizer: a pair's labels are the Chinese ids, and saving it
    # keeps both vocabularies
    reference = ours.encode("猫坐在垫子上。", add_eos=True)
    assert pair.batch_decode([reference, reference], skip_special_tokens=True) == ["猫坐在垫子上。"] * 2
    pair._decode_use_source_tokenizer = True  # as inseq reads source tokens back
    assert pair.convert_tokens_to_string(["the", "cat", "##s", "."]) == "the cats."
    pair._decode_use_source_tokenizer = False
    both = pair("The cat sits on the mat.", text_target="猫坐在垫子上。")
    assert both["labels"] == ours.encode("猫坐在垫子上。", add_eos=True)
    assert both["input_ids"] == shipped_translator.english.encode("The cat sits on the mat.")


def test_the_pair_tokenizer_saves_and_loads_again(tokenizers, tmp_path):
    _, _, pair = tokenizers
    pair.save_pretrained(tmp_path)
    again = transformers.AutoTokenizer.from_pretrained(tmp_path, trust_remote_code=True)
    assert type(again).__name__ == "TranslationTokenizer"
    assert again(text_target="猫坐").input_ids == pair(text_target="猫坐").input_ids
    assert again("the cat").input_ids == pair("the cat").input_ids


def test_the_folder_loads_without_running_its_code(hf_export, tokenizers):
    english, chinese, pair = tokenizers
    assert type(english).__name__ == type(chinese).__name__ == "TokenizersBackend"
    assert type(pair).__name__ == "TranslationTokenizer"
    assert "AutoTokenizer" in json.loads(
        (hf_export / "tokenizer_config.json").read_text(encoding="utf-8"))["auto_map"]


def test_command_line_export(tiny_checkpoint, tmp_path, capsys):
    from model.adapters import export_hf

    export_hf.main([str(tmp_path / "out"), "--checkpoint", str(tiny_checkpoint)])
    assert (tmp_path / "out" / "model.safetensors").is_file()
    with pytest.raises(SystemExit) as exit_:
        export_hf.main([str(tmp_path / "again"), "--checkpoint", str(tmp_path / "nothing")])
    assert exit_.value.code == 2
    assert "no usable checkpoint" in capsys.readouterr().err
