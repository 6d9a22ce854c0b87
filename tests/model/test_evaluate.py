"""model.training.evaluate: the repetition measure, batched beam search, and the eval.json it writes,
on a tiny random model and data written here (never ../shared)."""

from __future__ import annotations

import json
import re

import pytest
import torch

from model.decoding import DecodingOptions, beam_batch, generate, pad
from model.training.data import Pair
from model.training.evaluate import fixture_pairs, main, read_table
from model.training.scoring import bleu_chrf, is_repetitive, repeated_runs, repetition_rate
from model.transformer import EOS_ID, Transformer, TransformerConfig
from tests.conftest import make_tiny_checkpoint


@pytest.mark.parametrize(
    ("output", "reference", "expected"),
    [
        ("从小偷偷偷偷中有一种难。", "从小偷那里偷东西很难。", True),  # one character 4 times
        ("我们要在华华华华地工作。", "李伟在深圳工作。", True),
        ("谢谢你谢谢你谢谢你", "谢谢你。", True),  # a 3-character span 3 times
        ("一二三四一二三四一二三四", "一二三四", True),  # a 4-character span 3 times
        ("一二三四五一二三四五一二三四五", "一二三四五", False),  # 5 characters: too long a span
        ("我们我们去", "我们去。", False),  # twice is not a run
        ("他看看书。", "他看书。", False),
        ("哈哈哈，太好笑了。", "哈哈哈，真好笑。", False),  # the reference has the same run
        ("图书馆有5000本书。", "图书馆有5万多本书。", False),  # digits only: not a repetition
        ("好……", "好。", False),
        ("", "你好。", False),
    ],
)
def test_is_repetitive(output, reference, expected):
    assert is_repetitive(output, reference) is expected


def test_repeated_runs_lists_each_span_written_three_times():
    assert repeated_runs("偷偷偷偷") == {"偷偷偷"}
    assert repeated_runs("偷偷偷偷偷偷") == {"偷偷偷", "偷偷偷偷偷偷"}
    assert repeated_runs("abab ab ab") == set()


def test_repetition_rate_is_a_percentage_of_outputs():
    outputs = ["华华华华", "你好。", "谢谢。", "哈哈哈"]
    references = ["华为", "你好。", "谢谢。", "哈哈哈！"]
    assert repetition_rate(outputs, references) == 25.0
    assert repetition_rate([], []) == 0.0


def test_batched_beam_search_equals_one_sentence_at_a_time():
    torch.manual_seed(0)
    config = TransformerConfig(40, 30, d_model=32, n_heads=4, n_encoder_layers=2,
                               n_decoder_layers=2, d_ff=64, dropout=0.0)
    model = Transformer(config).eval()
    with torch.no_grad():
        model.output.bias[EOS_ID] += 2.0  # so some hypotheses end before max_len
    generator = torch.Generator().manual_seed(0)
    sources = [torch.randint(4, 40, (n,), generator=generator).tolist() + [EOS_ID]
               for n in (1, 7, 3, 5, 2, 8, 4)]
    lengths = set()
    for beam_size in (1, 3, 4):
        batched = beam_batch(model, pad(sources), beam_size, max_len=15)
        for source, tokens in zip(sources, batched, strict=True):
            alone = generate(model, torch.tensor([source]),
                             DecodingOptions(strategy="beam", beam_size=beam_size, max_len=15))
            assert tokens == alone.tokens
            lengths.add(len(tokens) == 15)
    assert lengths == {True, False}, "both endings (<eos> and max_len) are exercised"


def test_fixture_pairs_spread_over_the_split():
    test = [Pair(f"sentence {i}", f"句子{i}", "tatoeba") for i in range(1054)]
    chosen = fixture_pairs(test)
    assert len(chosen) == len(set(chosen)) == 100
    assert chosen[0] == test[0] and chosen[-1].english == "sentence 1043"
    assert fixture_pairs(test[:30]) == test[:30]


TATOEBA = [
    ("Hello.", "你好。"), ("Thank you.", "谢谢。"), ("I like tea.", "我喜欢茶。"),
    ("Where is he?", "他在哪里？"), ("It is cold today.", "今天很冷。"), ("We are students.", "我们是学生。"),
    ("The dog runs.", "狗在跑。"), ("I am tired.", "我累了。"),
]
HSK = [("I have two books.", "我有两本书。"), ("She is my teacher.", "她是我的老师。"),
       ("The shop is open.", "商店开着。")]
CAPTIONS = [("A man rides a bike.", "一个男人骑自行车。"),
            ("Two girls play in the park.", "两个女孩在公园里玩。")]
TICO = [("Wash your hands often.", "经常洗手。"), ("Wear a mask.", "戴口罩。")]
NTREX = [("The minister spoke on Monday.", "部长星期一发表了讲话。"),
         ("Prices rose by 3%.", "价格上涨了3%。")]


def write_data(folder):
    """The five source files in their real formats, with sentences written here."""
    folder.mkdir()
    tatoeba = [f"{e}\t{z}\tCC-BY 2.0 (France) Attribution: tatoeba.org" for e, z in TATOEBA]
    (folder / "tatoeba-cmn-eng.tsv").write_text("\n".join(tatoeba) + "\n", encoding="utf-8")
    hsk = ["id\thsk_level\ttopic\tenglish\tchinese_simplified\tchinese_traditional\tpinyin"]
    hsk += [f"h{i}\t1\tt\t{e}\t{z}\t{z}\tp" for i, (e, z) in enumerate(HSK)]
    (folder / "hsk-sentences-en-zh.tsv").write_text("\n".join(hsk) + "\n", encoding="utf-8")
    # every Tatoeba sentence is also a caption: a narrow model trained on the ones Tatoeba kept
    for name, pairs in (("3am-captions-en-zh.tsv", CAPTIONS + TATOEBA), ("tico19-en-zh.tsv", TICO),
                        ("ntrex128-en-zh.tsv", NTREX)):
        (folder / name).write_text("".join(f"{e}\t{z}\n" for e, z in pairs), encoding="utf-8")
    return folder


PROBE = """category\tenglish\tchinese
numbers\tThere are 365 days in a year.\t一年有365天。
numbers\tIt costs 25 dollars.\t这要25美元。
everyday\tThe cat sits on the mat.\t猫坐在垫子上。
"""

LEARNER = """category\tenglish\tchinese\tmust
titles\tDr. Smith is here.\t史密斯医生在这里。\t
no_stop\tThe cat sits on the mat\t猫坐在垫子上\t
"""


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """eval.json of a tiny random model trained (say its settings) narrow, as the first model was."""
    root = tmp_path_factory.mktemp("evaluate")
    data = write_data(root / "data")
    checkpoint = make_tiny_checkpoint(root / "checkpoint")
    history = json.loads((checkpoint / "history.json").read_text(encoding="utf-8"))
    # no "narrow" key: a checkpoint from before the wider domains
    history["settings"] = {"seed": 13, "test_size": 1, "dev_size": 1, "dictionary": False}
    (checkpoint / "history.json").write_text(json.dumps(history), encoding="utf-8")
    (root / "probe.tsv").write_text(PROBE, encoding="utf-8")
    out, fixture = root / "eval.json", root / "fixture.tsv"
    (root / "learner.tsv").write_text(LEARNER, encoding="utf-8")
    main(["--data", str(data), "--checkpoint", str(checkpoint), "--out", str(out),
          "--probe", str(root / "probe.tsv"), "--learner", str(root / "learner.tsv"),
          "--fixture", str(fixture), "--write-fixture",
          "--examples", "2", "--threads", "1"])
    return json.loads(out.read_text(encoding="utf-8")), root


def test_report_has_every_split_with_both_decodings(evaluated):
    report, _ = evaluated
    assert report["split"] == {"seed": 13, "test_size": 1, "dev_size": 1, "dictionary": False,
                               "narrow": True}
    assert set(report["sets"]) == {"tatoeba_test", "hsk_test", "captions_test", "tico_test",
                                   "ntrex_test"}
    for result in report["sets"].values():
        assert result["pairs"] >= 1
        for decoding in ("greedy", "beam4"):
            assert {"bleu", "chrf", "repetition_pct", "seconds"} <= set(result[decoding])
            assert 0 <= result[decoding]["repetition_pct"] <= 100
        assert 1 <= len(result["examples"]) <= 2
        assert {"english", "reference", "greedy", "beam4"} == set(result["examples"][0])
    assert report["test"]["decoding"] == "beam 4"
    assert report["test"]["bleu"] == report["sets"]["tatoeba_test"]["beam4"]["bleu"]


def test_report_counts_test_sentences_the_checkpoint_trained_on(evaluated):
    report, root = evaluated
    # Tatoeba sentences outside Tatoeba's test and dev were in the narrow model's training data;
    # those the wide split drew into the captions test set are "seen" there
    from model.training.data import load_pairs, split_pairs

    splits = split_pairs(load_pairs(root / "data"), seed=13, n_test=1, n_dev=1, n_test_hsk=1)
    narrow_train = {e for e, _ in TATOEBA} - {p.english for p in splits.test + splits.dev}
    expected = sum(p.english in narrow_train for p in splits.domain_test["captions"])
    assert expected >= 1
    assert report["sets"]["captions_test"]["seen_in_training"] == expected
    assert report["sets"]["tatoeba_test"]["seen_in_training"] == 0
    assert report["sets"]["tico_test"]["seen_in_training"] == 0


def test_report_scores_the_everyday_splits_again_without_their_final_stops(evaluated):
    report, _ = evaluated
    assert set(report["no_stops"]) == {"tatoeba_test", "hsk_test"}  # no Tatoeba extra file here
    for name, result in report["no_stops"].items():
        assert result["pairs"] == report["sets"][name]["pairs"]  # every pair here ends in a mark
        for example, with_stop in zip(result["examples"], report["sets"][name]["examples"],
                                      strict=True):
            assert example["english"] == with_stop["english"].rstrip(".!?")
            assert example["reference"] == with_stop["reference"].rstrip("。！？.!?")
            assert example["english"][-1] not in ".!?" and example["reference"][-1] not in "。！？"
        assert {"bleu", "chrf", "repetition_pct"} <= set(result["greedy"]) | set(result["beam4"])
    # the outputs are scored without a final mark: the BLEU of the examples' outputs so stripped
    hsk = report["no_stops"]["hsk_test"]
    assert hsk["pairs"] == len(hsk["examples"]) == 1  # the example is the whole set
    for decoding in ("greedy", "beam4"):
        stripped = [e[decoding].rstrip("。！？.!?") for e in hsk["examples"]]
        assert hsk[decoding]["bleu"] == bleu_chrf(stripped, [e["reference"] for e in hsk["examples"]])[0]

def test_report_keeps_every_probe_output_by_category(evaluated):
    report, _ = evaluated
    probe = report["probe"]
    assert probe["pairs"] == 3
    assert set(probe["categories"]) == {"numbers", "everyday"}
    assert probe["categories"]["numbers"]["pairs"] == 2
    assert {"bleu", "chrf", "repetition_pct"} <= set(probe["categories"]["numbers"]["beam4"])
    assert [o["english"] for o in probe["outputs"]] == [
        "There are 365 days in a year.", "It costs 25 dollars.", "The cat sits on the mat."
    ]


def test_report_keeps_the_learner_probe_by_category(evaluated):
    learner = evaluated[0]["probe_learner"]
    assert learner["pairs"] == 2 and set(learner["categories"]) == {"titles", "no_stop"}
    assert [o["english"] for o in learner["outputs"]] == ["Dr. Smith is here.",
                                                         "The cat sits on the mat"]
    assert "kept" not in learner  # no row says what must come through
    # the row without a final stop is scored on its output without one, the titled row as it is
    outputs = learner["outputs"]
    for decoding in ("greedy", "beam4"):
        assert learner["categories"]["no_stop"][decoding]["bleu"] == bleu_chrf(
            [outputs[1][decoding].rstrip("。！？.!?")], ["猫坐在垫子上"])[0]
        assert learner["categories"]["titles"][decoding]["bleu"] == bleu_chrf(
            [outputs[0][decoding]], ["史密斯医生在这里。"])[0]


def test_the_shipped_learner_probe_is_well_formed():
    from model.training.evaluate import LEARNER_FILE

    rows = read_table(LEARNER_FILE)
    assert {r["category"] for r in rows} == {"titles", "no_stop", "everyday"}
    for row in rows:
        assert set(row) == {"category", "english", "chinese", "must"}
        assert all(item in row["chinese"] for item in row["must"].split(",") if item)
        if row["category"] == "no_stop":
            assert row["english"][-1] not in ".!?" and row["chinese"][-1] not in "。！？"
        elif row["category"] == "everyday":  # typed with their stop, a reference with one too
            assert row["english"][-1] in ".!?" and row["chinese"][-1] in "。！？"
        else:
            assert re.search(r"\b(?:Mr|Mrs|Ms|Dr)\. [A-Z]|\bProfessor [A-Z]", row["english"])


def test_fixture_is_written_from_the_tatoeba_test_split_and_scored(evaluated):
    report, root = evaluated
    rows = read_table(root / "fixture.tsv")
    assert len(rows) == 1 and (rows[0]["english"], rows[0]["chinese"]) in TATOEBA
    assert report["fixture"]["pairs"] == 1 and report["fixture"]["in_tatoeba_test"]
    assert {"bleu", "chrf"} == set(report["fixture"]["greedy"])


def test_probe_set_is_well_formed():
    from model.training.evaluate import PROBE_FILE

    rows = read_table(PROBE_FILE)
    assert 90 <= len(rows) <= 120
    categories = {r["category"] for r in rows}
    assert {"numbers", "dates", "money", "time", "people", "places", "long", "questions",
            "negation", "idioms"} <= categories
    for row in rows:
        assert set(row) == {"category", "english", "chinese"} and all(row.values())
        assert not set(row["chinese"]) & set(",?!;:"), "full-width punctuation in references"
        if row["category"] == "long":
            assert 25 <= len(row["english"].split()) <= 40
    assert {"The cat sits on the mat.", "It costs 25 dollars."} <= {r["english"] for r in rows}


def test_previous_figures_keep_what_a_before_after_needs():
    from model.training.evaluate import previous_figures

    earlier = {"checkpoint": "checkpoints", "sets": {"tatoeba_test": {"greedy": {"bleu": 40.0}}},
               "probe": {"greedy": {"bleu": 29.0}}, "fixture": {"greedy": {"bleu": 43.2}},
               "test": {"bleu": 41.5}}
    previous = previous_figures(earlier)
    assert previous["sets"] == earlier["sets"] and previous["probe"] == earlier["probe"]
    assert set(previous["label"]) == {"en", "zh"} and "test" not in previous
    named = previous_figures(earlier, ("stage 3", "第 3 阶段"))
    assert named["label"] == {"en": "stage 3", "zh": "第 3 阶段"}
