import json

from model.tokenizer import SPECIAL_TOKENS, ChineseTokenizer, EnglishTokenizer
from model.transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID

SENTENCES = ["The cat sits on the mat.", "The cats are sitting.", "A dog sits on a mat."] * 5


def test_special_token_ids():
    assert SPECIAL_TOKENS == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    english = EnglishTokenizer.train(SENTENCES, vocab_size=80)
    assert [english.id_to_token(i) for i in range(4)] == SPECIAL_TOKENS


def test_english_round_trip(tmp_path):
    english = EnglishTokenizer.train(SENTENCES, vocab_size=80)
    ids = english.encode("The cat sits on the mat.")
    assert ids[-1] == EOS_ID
    assert english.decode(ids) == "the cat sits on the mat."
    english.save(tmp_path / "en.json")
    again = EnglishTokenizer.load(tmp_path / "en.json")
    assert again.encode("The cats sit.") == english.encode("The cats sit.")
    assert "".join(p.removeprefix("##") for p in again.tokenize("sitting")) == "sitting"


def test_chinese_characters_round_trip(tmp_path):
    chinese = ChineseTokenizer.train(["猫坐在垫子上。", "狗 在 跑", "你好！在哪里？"])
    assert chinese.tokenize("猫坐在垫子上") == ["猫", "坐", "在", "垫", "子", "上"]
    ids = chinese.encode("猫坐在垫子上。", add_bos=True, add_eos=True)
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID
    assert chinese.decode(ids[1:]) == "猫坐在垫子上。"
    assert chinese.encode("鱼")[0] == UNK_ID
    assert chinese.decode(chinese.encode("你好！在哪里？")) == "你好！在哪里？"
    chinese.save(tmp_path / "zh.json")
    assert ChineseTokenizer.load(tmp_path / "zh.json").vocabulary == chinese.vocabulary


def test_special_tokens_are_registered_even_in_a_file_saved_without_them(tmp_path):
    """<pad> <bos> <eos> <unk> are the tokenizer's special tokens at ids 0–3, as in a Hugging Face
    tokenizer (tests/model/test_export_hf.py holds the two to the same ids): a file written
    without them registered (the shipped run's vocabulary was) reads with them, and a text that
    spells one out gives its id in both."""
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[2] / "model/checkpoints/tokenizer_en.json"
    english = EnglishTokenizer.load(shipped)
    assert english.tokenize("I said it again.") == ["i", "said", "it", "again", "."]
    data = json.loads(shipped.read_text(encoding="utf-8"))
    data["added_tokens"] = []
    bare = tmp_path / "tokenizer_en.json"
    bare.write_text(json.dumps(data), encoding="utf-8")
    for tokenizer in (english, EnglishTokenizer.load(bare),
                      EnglishTokenizer.train(["the cat sat", "the dog ran"] * 3, vocab_size=60)):
        assert [tokenizer.tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
        assert [a["content"] for a in json.loads(tokenizer.tokenizer.to_str())["added_tokens"]
                if a["special"]] == SPECIAL_TOKENS
        assert tokenizer.encode("the <eos> the")[1] == 2


PIECES = """
import sys
from model.tokenizer import EnglishTokenizer
sentences = [f"{a} {b}ing {c}s." for a in ("zork", "blip", "quax", "vemt") for b in ("tarp", "kelb", "snof")
             for c in ("dune", "mir", "olk")]
print(EnglishTokenizer.train(sentences, vocab_size=60).tokenizer.to_str())
"""


def test_training_learns_the_same_pieces_whatever_the_hash_seed():
    """Ties between pairs of equal count go to the pair that sorts first, so two processes (each
    with its own hash seed) learn the same pieces from the same sentences."""
    import os
    import subprocess
    import sys

    processes = [subprocess.Popen([sys.executable, "-c", PIECES], stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, "PYTHONHASHSEED": seed}) for seed in ("1", "2")]
    runs = [process.communicate(timeout=300)[0] for process in processes]  # both at once
    assert [process.returncode for process in processes] == [0, 0]
    assert runs[0] == runs[1] and '"##ing"' in runs[0]


def test_learn_merges_merges_the_most_frequent_pair_first_and_breaks_ties_by_order():
    from collections import Counter

    from model.tokenizer import learn_merges

    vocab, merges = learn_merges(Counter({"abc": 5, "abd": 5, "xy": 5}), vocab_size=100)
    assert merges[0] == ("a", "##b") and vocab[4:11] == ["##b", "##c", "##d", "##y", "a", "x", "ab"]
    assert merges[1:] == [("ab", "##c"), ("ab", "##d"), ("x", "##y")]
    assert learn_merges(Counter({"ab": 1}), vocab_size=100)[1] == []  # seen once: no merge
