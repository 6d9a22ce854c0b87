"""Training data and its transforms (``transforms.py``): joined long pairs, varied numbers, names,
titles, Latin words and acronyms, dropped final stops, rare words — each as a recipe names it too."""

import gzip
import re
from collections import Counter

from model.training.data import Pair, read_acronyms, read_names
from model.training.transforms import (
    concatenate_pairs,
    drop_final_stops,
    vary_acronyms,
    vary_latin,
    vary_names,
    vary_numbers,
    vary_titles,
)

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


def test_vary_latin_swaps_a_kept_english_word_on_both_sides_for_one_of_its_shape():
    pairs = [Pair("I love AI and COVID-19 tests.", "我爱AI和COVID-19检测。", "tico"),
             Pair("Ms. Médoune Sy spoke.", "Médoune Sy女士发了言。", "un"),  # no word inside Médoune
             Pair("I use a computer.", "我用电脑。", "tatoeba"),  # nothing kept: not varied
             Pair("Tom is here.", "汤姆在这里。", "tatoeba")]  # translated, not kept: not varied
    varied = vary_latin(pairs, seed=4, copies=30)
    assert len(varied) == 60
    for pair in varied[:30]:
        ai, covid = re.fullmatch(r"I love ([A-Z]+) and ([A-Z]{5}-\d\d) tests\.", pair.english).groups()
        assert pair.chinese == f"我爱{ai}和{covid}检测。"
        assert 2 <= len(ai) <= 5
    assert len({pair.english for pair in varied[:30]}) > 25  # random words, not a few repeated
    for pair in varied[30:]:
        (name,) = re.fullmatch(r"Ms\. Médoune ([A-Z][a-z]) spoke\.", pair.english).groups()
        assert pair.chinese == f"Médoune {name}女士发了言。"
    assert vary_latin(pairs, seed=4, copies=30) == varied



def test_vary_latin_short_swaps_words_of_capitals_for_short_acronyms_and_zero_draws_as_before():
    pairs = [Pair("The WHO and COVID-19 tests.", "WHO和COVID-19检测。", "tico")]
    assert vary_latin(pairs, seed=4, copies=40, short=0.0) == vary_latin(pairs, seed=4, copies=40)
    varied = vary_latin(pairs, seed=4, copies=200, short=1.0)
    acronyms = []
    for pair in varied:
        who, covid = re.fullmatch(r"The ([A-Z]+) and ([A-Z]{5}-\d\d) tests\.", pair.english).groups()
        assert pair.chinese == f"{who}和{covid}检测。"
        acronyms.append(who)
    assert all(2 <= len(word) <= 3 for word in acronyms)  # every word of capitals: short
    first = [word[0] for word in acronyms]
    assert 0.4 < sum(letter in "AI" for letter in first) / len(first) < 0.75  # half A/I, + chance
    assert len(set(acronyms)) > 100


def test_drop_final_stops_copies_a_share_of_the_pairs_without_their_final_marks_on_both_sides():
    pairs = [Pair(f"I love AI {i}.", f"我爱AI {i}。", "tatoeba") for i in range(400)] + [
        Pair("Is it true?!", "是真的吗？！", "tatoeba"),
        Pair("A dog runs on the beach", "一只狗在海滩上奔跑", "captions"),  # no mark: nothing to drop
        Pair("Wait, what.", "等等，什么", "tatoeba"),  # the Chinese has none: not copied
    ]
    every = drop_final_stops(pairs, 1.0)
    assert every[-1] == Pair("Is it true", "是真的吗", "tatoeba")  # all final marks, inner ones kept
    assert len(every) == 401 and every[0] == Pair("I love AI 0", "我爱AI 0", "tatoeba")
    some = drop_final_stops(pairs, 0.25, seed=5)
    assert 60 < len(some) < 140  # about a quarter of the 401 that can lose their mark
    assert set(some) <= set(every) and drop_final_stops(pairs, 0.25, seed=5) == some
    assert drop_final_stops(pairs, 0.0) == []


def test_vary_titles_puts_a_title_before_a_new_name_in_english_and_after_it_in_chinese():
    names = {"Tom": "汤姆", "Mary": "玛丽", "Elizabeth": "伊丽莎白", "Paris": "巴黎"}
    pairs = [Pair("Tom is tired.", "汤姆累了。", "tatoeba"),
             Pair("Mary lost her key.", "玛丽丢了她的钥匙。", "tatoeba"),
             Pair("Tom hurt himself.", "汤姆伤了自己。", "tatoeba"),
             Pair("Mr. Tom is here.", "汤姆先生在这里。", "tatoeba"),  # a title already: left alone
             Pair("Karen Mary sings.", "凯伦·玛丽唱歌。", "ntrex"),  # a surname: no title inside
             Pair("I like tea.", "我喜欢茶。", "tatoeba")]  # no name
    varied = vary_titles(pairs, names, copies=40, seed=2, limit=1000)
    assert len(varied) == 120
    for pair in varied:
        title, name = re.fullmatch(r"(Mr\.|Mrs\.|Ms\.|Dr\.|Professor) ([A-Z][a-z]+) .*",
                                   pair.english).groups()
        original = "Mary" if "her key" in pair.english else "Tom"
        assert name != original and name in names
        assert pair.chinese.startswith(names[name] + dict(TITLES_BY_ENGLISH)[title]) or (
            title == "Dr." and pair.chinese.startswith(names[name] + "医生"))
        if "her" in pair.english:
            assert title != "Mr."
        if "himself" in pair.english:
            assert title not in ("Mrs.", "Ms.")
    assert {p.english.split()[0] for p in varied} == {"Mr.", "Mrs.", "Ms.", "Dr.", "Professor"}
    assert len(vary_titles(pairs, names, copies=40, seed=2, limit=7)) == 7
    assert vary_titles(pairs, names, copies=40, seed=2, limit=1000) == varied


TITLES_BY_ENGLISH = [("Mr.", "先生"), ("Mrs.", "太太"), ("Ms.", "女士"), ("Dr.", "博士"),
                     ("Professor", "教授")]

CEDICT_LINES = """\
# a few CC-CEDICT lines in its own format
湯姆 汤姆 [Tang1 mu3] /Tom (name)/
倫敦 伦敦 [Lun2 dun1] /London, capital of United Kingdom/
波士頓 波士顿 [Bo1 shi4 dun4] /Boston/
里昂 里昂 [Li3 ang2] /Lyon (city in France)/
獅子 狮子 [Shi1 zi5] /Leo (star sign)/
佛教 佛教 [Fo2 jiao4] /Buddhism/
星期三 星期三 [xing1 qi1 san1] /Wednesday/
田中 田中 [Tian2 zhong1] /Tanaka (Japanese surname)/
貓 猫 [mao1] /cat/
"""


def _cedict(tmp_path):
    path = tmp_path / "cedict.u8.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(CEDICT_LINES)
    return path


def test_read_names_keeps_person_names_and_wide_adds_places_only(tmp_path):
    path = _cedict(tmp_path)
    assert read_names(path) == {"Tom": "汤姆"}
    assert read_names(path, wide=True) == {
        "Tom": "汤姆", "London": "伦敦", "Boston": "波士顿", "Lyon": "里昂"}


def test_vary_names_swaps_a_name_on_both_sides_with_another_of_the_list(tmp_path):
    names = read_names(_cedict(tmp_path), wide=True)
    pairs = [Pair("Tom lives in London.", "汤姆住在伦敦。", "tatoeba"),
             Pair("I see a cat.", "我看见一只猫。", "tatoeba")]
    varied = vary_names(pairs, names, copies=8, seed=3)
    assert len(varied) == 8  # only the pair with names on both sides is varied
    for pair in varied:
        found = [w for w in names if w in pair.english.split() or w + "." in pair.english.split()]
        assert len(found) == 2 and all(names[w] in pair.chinese for w in found)
    assert any("Tom" not in pair.english for pair in varied)


def test_vary_numbers_can_give_several_copies_of_any_length():
    pairs = [Pair("She was born in 1987.", "她出生于1987年。", "tatoeba"),
             Pair("I like tea.", "我喜欢茶。", "tatoeba")]
    varied = vary_numbers(pairs, seed=5, copies=40, any_length=True)
    assert len(varied) == 40
    lengths = set()
    for pair in varied:
        (number,) = re.findall(r"\d+", pair.english)
        assert pair.chinese == f"她出生于{number}年。"
        lengths.add(len(number))
    assert len(lengths) >= 3 and 4 in lengths  # the old length half the time, others too
    (default,) = vary_numbers(pairs, seed=5)  # the default: one copy, the same length
    assert len(re.findall(r"\d+", default.english)[0]) == 4


def test_an_opt_in_source_moves_no_held_out_split():
    """The Bible (or the dictionary) shares English with the new domains now and then ("Jesus
    wept."); reading it must not redraw their test and dev sentences, or a run with it would be
    scored on other sentences, some of which a run without it trained on."""
    from model.training.data import split_pairs

    def pairs(source, count, shared=()):
        own = [Pair(f"{source} sentence number {i}.", f"{source}{i}", source) for i in range(count)]
        return own + [Pair(english, "共享", source) for english in shared]

    shared = [f"tatoeba_extra sentence number {i}." for i in range(0, 40, 3)]
    base = {"tatoeba": pairs("tatoeba", 60), "hsk": pairs("hsk", 30),
            "tatoeba_extra": pairs("tatoeba_extra", 40), "un": pairs("un", 40)}
    without = split_pairs(base, n_test=5, n_dev=5, n_test_hsk=5)
    with_bible = split_pairs(base | {"bible": pairs("bible", 20, shared)}, n_test=5, n_dev=5,
                             n_test_hsk=5)
    assert with_bible.domain_test == without.domain_test
    assert with_bible.domain_dev == without.domain_dev
    assert (with_bible.test, with_bible.dev, with_bible.test_hsk) == (without.test, without.dev,
                                                                      without.test_hsk)
    held_out = {p.english for split in [*without.domain_test.values(), *without.domain_dev.values()]
                for p in split}
    assert not held_out & {p.english for p in with_bible.train}  # nor trains on them


def test_rare_word_pairs_copy_the_everyday_pairs_with_a_rare_word():
    from model.training.transforms import rare_word_pairs

    common = [Pair(f"I like tea with {w}.", "我喜欢茶。", "tatoeba") for w in ("milk", "sugar", "lemon")]
    rare = Pair("She loves programming.", "她热爱编程。", "tatoeba_extra")
    news = Pair("Programming is news.", "编程是新闻。", "ntrex")  # not an everyday source
    pairs = common + [rare, rare, news]  # the rare pair upsampled twice
    # "programming" is in one distinct everyday pair (the duplicate and the news pair don't
    # count), and so are "milk", "sugar", "lemon"; "i", "like", "tea", "with" are in three
    extra = rare_word_pairs(pairs, max_pairs=1, copies=2)
    assert extra.count(rare) == 4  # two copies per occurrence
    assert news not in extra
    assert len(extra) == 4 + 2 * 3
    assert rare_word_pairs(pairs, max_pairs=0) == []
    # two distinct pairs with the same words: each word is in 2 pairs, none is rare at 1
    no_tail = [Pair("I like tea.", "我喜欢茶。", "hsk"), Pair("Tea? I like tea.", "茶？我喜欢。", "hsk"),
               news]
    assert rare_word_pairs(no_tail, max_pairs=1) == []


def test_vary_acronyms_puts_a_short_acronym_where_a_name_was_on_both_sides():
    names = {"Tom": "汤姆", "Mary": "玛丽"}
    pairs = [Pair("I love Tom.", "我爱汤姆。", "tatoeba"),
             Pair("Mary and Tom are here.", "玛丽和汤姆在这里。", "tatoeba"),
             Pair("It is an apple, am I right?", "这是个苹果，我说得对吗？", "tatoeba"),
             Pair("I like tea.", "我喜欢茶。", "tatoeba")]  # no name
    varied = vary_acronyms(pairs, names, copies=300, seed=3, limit=10000)
    assert len(varied) == 600
    acronyms = set()
    for pair in varied:
        english = re.fullmatch(r"I love ([A-Z]{2,3})\.|(?:Mary and ([A-Z]{2,3})|([A-Z]{2,3}) and Tom) "
                               r"are here\.", pair.english)
        assert english, pair.english
        acronym = next(filter(None, english.groups()))
        acronyms.add(acronym)
        assert acronym in pair.chinese and pair.chinese.count("汤姆") + pair.chinese.count("玛丽") == (
            0 if pair.english.startswith("I love") else 1)
    # the data's own words are never drawn: "IT" would teach the model to copy the pronoun "it"
    assert not {"IT", "IS", "AN", "AM", "I"} & acronyms
    assert sum(a[0] in "AI" for a in acronyms) > 10 and any(a[0] not in "AI" for a in acronyms)
    assert vary_acronyms(pairs, names, copies=300, seed=3, limit=10000) == varied
    assert len(vary_acronyms(pairs, names, copies=300, seed=3, limit=9)) == 9


ACRONYM_LINES = """\
人工智能 人工智能 [ren2 gong1 zhi4 neng2] /artificial intelligence (AI)/
世界衛生組織 世界卫生组织 [Shi4 jie4 Wei4 sheng1 Zu3 zhi1] /World Health Organization (WHO)/
個人電腦 个人电脑 [ge4 ren2 dian4 nao3] /personal computer/PC/
中國人民解放軍 中国人民解放军 [Zhong1 guo2 Ren2 min2 Jie3 fang4 jun1] /Chinese People's Liberation Army (PLA)/
三拗湯 三拗汤 [san1 ao4 tang1] /san'ao decoction (TCM)/
借條 借条 [jie4 tiao2] /receipt for a loan/IOU/
三K黨 三K党 [San1 K dang3] /Ku Klux Klan/KKK/
光腚腫菊 光腚肿菊 [Guang1 ding4 Zhong3 ju2] /(Internet slang) punning reference to the National Radio and\
Television Administration (NRTA)/
羅格 罗格 [Luo2 ge2] /Logue or Rogge (name)/Jacques Rogge, president of International Olympic Committee (IOC)/
國大 国大 [Guo2 Da4] /National University of Singapore (NUS)/Indian National Congress (INC)/
"""


def test_read_acronyms_keeps_glosses_that_spell_the_acronym_out(tmp_path):
    path = tmp_path / "cedict.u8.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(ACRONYM_LINES)
    # a domain tag (TCM), a gloss that does not spell it (IOU), a headword with Latin letters, a
    # tagged pun (NRTA), a gloss that only mentions it (IOC: a person) and a headword of two: out
    assert read_acronyms(path) == {"AI": "人工智能", "WHO": "世界卫生组织", "PC": "个人电脑",
                                   "PLA": "中国人民解放军"}


def test_vary_acronyms_puts_a_share_of_terms_with_their_chinese():
    names = {"Tom": "汤姆"}
    # the terms' characters appear in the data's Chinese (a pair without a name: never varied)
    pairs = [Pair("I love Tom.", "我爱汤姆。", "tatoeba"),
             Pair("They work there.", "人工智能、世界卫生组织和信息技术在那里。", "tatoeba")]
    terms = {"AI": "人工智能", "WHO": "世界卫生组织", "IT": "信息技术"}
    varied = vary_acronyms(pairs + [Pair("Is it Tom?", "是汤姆吗？", "tatoeba")], names, copies=200,
                           seed=4, terms=terms, term_share=0.5)
    loved = [p for p in varied if p.english.startswith("I love")]
    as_terms = [p for p in loved if not re.search("[A-Z]", p.chinese)]
    assert 60 < len(as_terms) < 140  # about half of the 200
    assert all(p.chinese == f"我爱{terms[p.english[7:-1]]}。" for p in as_terms)
    assert {p.english for p in as_terms} == {"I love AI.", "I love WHO."}
    assert all(p.english[7:-1] == p.chinese[2:-1] for p in loved if p not in as_terms)
    assert not any(re.search(r"\bIT\b", p.english) for p in varied)  # "it" is a word of the data
    # a term with a character the data's Chinese never has is not drawn (the vocabulary would grow)
    rare = vary_acronyms(pairs, names, copies=50, seed=4, terms={"AI": "人工智能", "NRTA": "光腚肿菊"},
                         term_share=1.0)
    assert {p.chinese for p in rare} == {"我爱人工智能。"}
    # no share: the same draws as without terms
    assert vary_acronyms(pairs, names, copies=50, seed=4, terms=terms) == vary_acronyms(
        pairs, names, copies=50, seed=4)


def test_vary_acronyms_draws_a_term_the_data_never_writes_in_small_letters_and_favours_mentioned_ones():
    names = {"Tom": "汤姆"}
    terms = {"AI": "人工智能", "EU": "欧盟", "IT": "信息技术"}
    # "AI" and "Ai" are in the data, never "ai"; "it" is; 人工智能 is written 3 times
    pairs = [Pair("I love Tom.", "我爱汤姆。", "tatoeba"),
             Pair("AI is here, Ai says. Is it?", "艾说人工智能来了。欧盟、信息技术。", "tatoeba"),
             Pair("We use AI.", "我们用人工智能。", "tatoeba"),
             Pair("AI helps.", "人工智能有帮助。", "tatoeba")]
    varied = vary_acronyms(pairs, names, copies=400, seed=5, terms=terms, term_share=1.0, limit=10000)
    drawn = Counter(p.english for p in varied)
    assert set(drawn) == {"I love AI.", "I love EU."}  # IT: refused
    assert all(p.chinese in ("我爱人工智能。", "我爱欧盟。") for p in varied)
    # weights 1 + 3 (AI) and 1 + 1 (EU): AI about twice as often
    assert 1.5 < drawn["I love AI."] / drawn["I love EU."] < 2.7


RECIPE_TRANSFORMS = {
    "rare_words": {"max_pairs": 1},
    "names": {"copies": 2, "wide": True},
    "titles": {"copies": 2},
    "latin": {"copies": 2, "short": 0.5},
    "acronyms": {"copies": 2},
    "drop_stops": {"share": 1.0},
    "numbers": {"copies": 2, "any_length": True},
    "concat": {"count": 5},
}


def test_every_transform_a_recipe_names_adds_pairs_of_its_kind_the_same_for_a_seed(tmp_path):
    """Each of ``TRANSFORMS`` run as a recipe runs it (settings by name, CC-CEDICT from the data
    folder) adds pairs; the same seed draws the same pairs, and they run in ``TRANSFORMS``' order
    whatever order the settings list them in."""
    from model.training.data import CEDICT_FILE
    from model.training.transforms import TRANSFORMS, apply_transforms, check_transforms

    (tmp_path / "data").mkdir()
    with gzip.open(tmp_path / "data" / CEDICT_FILE, "wt", encoding="utf-8") as handle:
        handle.write(CEDICT_LINES + "瑪麗 玛丽 [Ma3 li4] /Mary (name)/\n")
    pairs = SHORT + [Pair("Tom has 3 cats.", "汤姆有3只猫。", "tatoeba"),
                     Pair("Tom loves COVID-19 news.", "汤姆喜欢COVID-19新闻。", "tatoeba")]
    assert set(RECIPE_TRANSFORMS) == set(TRANSFORMS)
    check_transforms(RECIPE_TRANSFORMS)
    for name, settings in RECIPE_TRANSFORMS.items():
        added, counts = apply_transforms(pairs, {name: settings}, 3, tmp_path / "data")
        assert counts[name] == len(added) - len(pairs) > 0, name
        assert added[: len(pairs)] == pairs
        assert apply_transforms(pairs, {name: settings}, 3, tmp_path / "data")[0] == added
    shuffled = dict(reversed(list(RECIPE_TRANSFORMS.items())))
    assert list(apply_transforms(pairs, shuffled, 3, tmp_path / "data")[1]) == list(TRANSFORMS)


def test_vary_titles_with_no_other_name_to_put_in_adds_nothing():
    """A name list of one name has no other to swap in: no pair, rather than a search for ever."""
    assert vary_titles([Pair("Tom is here.", "汤姆在这里。", "tatoeba")], {"Tom": "汤姆"}, copies=3) == []
