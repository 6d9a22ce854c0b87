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


def test_add_piece_joins_a_word_cut_in_two_and_reads_no_other_word_differently(tmp_path):
    from pathlib import Path

    import pytest

    # the pieces the run from random weights learned (the timeline keeps them as they were)
    shipped = Path(__file__).resolve().parents[2] / "model/checkpoints/timeline/tokenizer_en.json"
    before, english = EnglishTokenizer.load(shipped), EnglishTokenizer.load(shipped)
    assert english.tokenize("I love AI.") == ["i", "love", "a", "##i", "."]  # the article's piece
    size = english.vocab_size
    assert english.add_piece("ai") == size and english.vocab_size == size + 1
    assert english.tokenize("I love AI.") == ["i", "love", "ai", "."]
    assert english.encode("AI", add_eos=False) == [size]
    text = ("A cat sits on a mat; aid, aim, aisle, aiko, again, said, rain, Thailand, naive, "
            "Aida, main, I, a, an, artificial intelligence.")
    assert english.tokenize(text) == before.tokenize(text)  # only a lone "a" + "##i" is joined
    english.save(tmp_path / "en.json")
    assert EnglishTokenizer.load(tmp_path / "en.json").tokenize("AI's") == ["ai", "'", "s"]
    with pytest.raises(ValueError, match=r"cut into \['ai'\]"):
        english.add_piece("ai")  # one piece now
    with pytest.raises(ValueError, match="cut into"):
        english.add_piece("zqzqzq")  # cut into four
