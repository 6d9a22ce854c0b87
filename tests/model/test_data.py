"""Training-data helpers: joined long pairs (``concatenate_pairs``) and varied numbers."""

from model.training.data import Pair, concatenate_pairs, vary_numbers

SHORT = [
    Pair("The cat sleeps.", "猫在睡觉。", "tatoeba"),
    Pair("I like tea.", "我喜欢茶。", "tatoeba"),
    Pair("Where is the station?", "车站在哪里？", "tatoeba"),
    Pair("A dog runs on the beach", "一只狗在海滩上奔跑", "captions"),
    Pair("Two children play football", "两个孩子在踢足球", "captions"),
]


def test_joined_pairs_are_long_and_keep_each_part_on_both_sides():
    joined = concatenate_pairs(SHORT, 40, seed=3, words=(12, 20))
    assert len(joined) == 40
    by_english = {p.english: p for p in SHORT}
    for pair in joined:
        assert len(pair.english.split()) >= 12
        parts = [p for p in by_english.values() if p.english.rstrip(".") in pair.english]
        assert parts, pair
        # one source per joined pair, and every English part's Chinese is in the joined Chinese
        assert {p.source for p in parts} == {pair.source}
        for part in parts:
            assert part.chinese.rstrip("。") in pair.chinese


def test_a_part_without_final_punctuation_gets_one_on_both_sides():
    joined = concatenate_pairs(SHORT[3:], 10, seed=1, words=(8, 8))
    for pair in joined:
        assert ". " in pair.english and pair.english.endswith(".")
        assert "奔跑一只" not in pair.chinese and "足球两个" not in pair.chinese
        assert pair.chinese.endswith("。")


def test_joining_is_deterministic_for_a_seed():
    assert concatenate_pairs(SHORT, 20, seed=5) == concatenate_pairs(SHORT, 20, seed=5)
    assert concatenate_pairs(SHORT, 20, seed=5) != concatenate_pairs(SHORT, 20, seed=6)


def test_vary_numbers_changes_numbers_on_both_sides_alike():
    pairs = [Pair("It costs 25 dollars.", "它25美元。", "tatoeba"), Pair("Hello.", "你好。", "tatoeba")]
    (varied,) = vary_numbers(pairs, seed=2)
    number = varied.english.split()[2]
    assert number.isdigit() and len(number) == 2
    assert varied.chinese == f"它{number}美元。"
