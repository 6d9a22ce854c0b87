"""A short run of the real training command on a synthetic task learns it."""

import json
import random

import pytest

from model.decoding import DecodingOptions
from model.training.train import main as train_main
from model.translator import Translator

WORDS = {"one": "一", "two": "二", "three": "三", "four": "四", "five": "五", "six": "六"}


def _write_synthetic_data(folder):
    rng = random.Random(0)
    folder.mkdir()
    lines = []
    seen = set()
    while len(lines) < 700:
        words = [rng.choice(list(WORDS)) for _ in range(rng.randint(2, 4))]
        english = " ".join(words)
        if english in seen:
            continue
        seen.add(english)
        lines.append(f"{english}\t{''.join(WORDS[w] for w in words)}\tsynthetic")
    (folder / "tatoeba-cmn-eng.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    header = "id\thsk_level\ttopic\tenglish\tchinese_simplified\tchinese_traditional\tpinyin\n"
    hsk = "".join(
        f"h{i}\t1\tt\t{w} {w}\t{z}{z}\t{z}{z}\tx\n" for i, (w, z) in enumerate(WORDS.items())
    )
    (folder / "hsk-sentences-en-zh.tsv").write_text(header + hsk, encoding="utf-8")


def test_training_learns_a_synthetic_task(tmp_path):
    _write_synthetic_data(tmp_path / "data")
    out = tmp_path / "checkpoint"
    train_main([
        "--data", str(tmp_path / "data"), "--out", str(out), "--work", str(tmp_path / "work"),
        # lr factor 0.5: at 2 the dev BLEU of this tiny task swung between 100 and 22 from epoch
        # to epoch, so whether the last epochs landed above 50 depended on the CPU's rounding
        "--epochs", "25", "--batch-tokens", "150", "--warmup", "100", "--lr-factor", "0.5",
        "--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--dropout", "0",
        "--en-vocab", "60", "--average", "2", "--test-size", "40", "--dev-size", "40",
        "--no-progress", "--threads", "1", "--narrow",
    ])
    history = json.loads((out / "history.json").read_text())
    first, last = history["steps"][0]["loss"], history["epochs"][-1]["train_loss"]
    assert last < first / 3, (first, last)
    assert history["epochs"][-1]["dev_bleu"] > 50
    translator = Translator.load(out)
    assert translator.translate("two five one", DecodingOptions()).translation == "二五一"


def test_warm_start_grows_the_vocabulary_and_keeps_old_ids(tmp_path):
    """``--init`` continues from a checkpoint on wider data: new Chinese characters are appended,
    every old id keeps its character and its trained embedding row at the start."""
    _write_synthetic_data(tmp_path / "data")
    first = tmp_path / "first"
    common = ["--batch-tokens", "150", "--warmup", "50", "--dropout", "0", "--test-size", "40",
              "--dev-size", "40", "--no-progress", "--threads", "1", "--average", "1"]
    train_main(["--data", str(tmp_path / "data"), "--out", str(first), "--work", str(tmp_path / "w1"),
                "--epochs", "1", "--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64",
                "--en-vocab", "60", "--narrow", *common])
    rng = random.Random(1)
    wide = {"seven": "七", "eight": "八", **WORDS}
    for name in ("3am-captions-en-zh.tsv", "tico19-en-zh.tsv", "ntrex128-en-zh.tsv"):
        rows = set()
        while len(rows) < 60:
            words = [rng.choice(list(wide)) for _ in range(rng.randint(2, 5))]
            rows.add(f"{' '.join(words)} 12\t{''.join(wide[w] for w in words)}12")
        (tmp_path / "data" / name).write_text("\n".join(sorted(rows)) + "\n", encoding="utf-8")
    second = tmp_path / "second"
    train_main(["--data", str(tmp_path / "data"), "--out", str(second), "--work", str(tmp_path / "w2"),
                "--epochs", "1", "--init", str(first), "--vary-numbers", *common])
    old, new = Translator.load(first), Translator.load(second)
    assert new.chinese.vocabulary[: old.chinese.vocab_size] == old.chinese.vocabulary
    assert {"七", "八"} <= set(new.chinese.vocabulary[old.chinese.vocab_size :])
    assert new.model.config.d_model == 32 and new.model.config.n_encoder_layers == 1
    pieces = new.english.tokenizer.pre_tokenizer.pre_tokenize_str("in 2024")
    assert [piece for piece, _ in pieces] == ["in", "2", "0", "2", "4"]
    history = json.loads((second / "history.json").read_text())
    assert history["init"]["from"] == str(first) and history["init"]["epochs"] == 1


def _tiny_run_with_a_word_cut_in_two(tmp_path):
    """A first tiny run whose 31 pieces cut one word of the data in two ("four" → "fo" + "##ur"):
    the settings every run of the test shares, the run's folder, its translator and that word."""
    _write_synthetic_data(tmp_path / "data")
    first = tmp_path / "first"
    common = ["--data", str(tmp_path / "data"), "--batch-tokens", "150", "--warmup", "10",
              "--dropout", "0", "--test-size", "40", "--dev-size", "40", "--no-progress",
              "--threads", "1", "--average", "1", "--epochs", "1", "--narrow"]
    train_main([*common, "--out", str(first), "--work", str(tmp_path / "w1"), "--d-model", "32",
                "--heads", "2", "--layers", "1", "--d-ff", "64", "--en-vocab", "31"])
    old = Translator.load(first)
    cut = {w: old.english.tokenize(w) for w in WORDS}
    word = next((w for w, pieces in cut.items() if len(pieces) == 2), None)
    assert word, cut
    return common, first, old, word


def test_add_piece_gives_a_warm_started_run_one_more_english_piece_starting_from_its_gloss(tmp_path):
    """``--add-piece WORD=GLOSS`` joins a word the pieces cut in two, appends its id after every
    old one, and starts its embedding row as the mean of GLOSS's rows."""
    import torch

    from model.tokenizer import EnglishTokenizer
    from model.training.train import add_pieces

    common, first, old, word = _tiny_run_with_a_word_cut_in_two(tmp_path)
    # the row it starts from: the mean of the gloss's rows
    english = EnglishTokenizer.load(first / "tokenizer_en.json")
    state = {name: tensor.clone() for name, tensor in old.model.state_dict().items()}
    rows = state["src_embedding.tokens.weight"]
    add_pieces(english, state, [f"{word}=three six"])
    gloss = old.english.encode("three six", add_eos=False)
    assert torch.equal(state["src_embedding.tokens.weight"][-1], rows[gloss].mean(0))
    assert english.encode(word, add_eos=False) == [old.english.vocab_size]
    second = tmp_path / "second"
    train_main([*common, "--out", str(second), "--work", str(tmp_path / "w2"), "--init", str(first),
                "--add-piece", f"{word}=three six"])
    new = Translator.load(second)
    assert new.english.vocab_size == old.english.vocab_size + 1
    assert new.model.config.src_vocab_size == old.english.vocab_size + 1
    assert new.english.encode(word, add_eos=False) == [old.english.vocab_size]
    others = " ".join(w for w in WORDS if w != word)
    assert new.english.tokenize(others) == old.english.tokenize(others)
    new.translate(f"{word} one", DecodingOptions())  # the new row is read like any other


def test_new_pieces_only_trains_the_new_row_and_leaves_every_other_weight_as_it_was(tmp_path):
    from safetensors.torch import load_file

    common, first, old, word = _tiny_run_with_a_word_cut_in_two(tmp_path)
    second = tmp_path / "second"
    train_main([*common, "--out", str(second), "--work", str(tmp_path / "w2"), "--init", str(first),
                "--add-piece", f"{word}=three", "--new-pieces-only", "3", "--lr-factor", "2"])
    before = load_file(str(first / "weights.safetensors"))
    after = load_file(str(second / "weights.safetensors"))
    assert after.keys() == before.keys()
    for name, tensor in before.items():
        rows = tensor.shape[0]
        assert after[name][:rows].equal(tensor), name  # bit for bit
    added = after["src_embedding.tokens.weight"][old.english.vocab_size]
    gloss = before["src_embedding.tokens.weight"][old.english.encode("three", add_eos=False)].mean(0)
    assert not added.equal(gloss)  # the new row learned


def test_frozen_chinese_rows_are_refused_when_the_data_would_add_chinese_characters(tmp_path, capsys):
    common, first, old, word = _tiny_run_with_a_word_cut_in_two(tmp_path)
    with (tmp_path / "data" / "tatoeba-cmn-eng.tsv").open("a", encoding="utf-8") as data:
        data.writelines(f"{word} seven {i}\t{WORDS[word]}七{i}\tsynthetic\n" for i in range(60))
    with pytest.raises(SystemExit, match="Chinese characters"):
        train_main([*common, "--out", str(tmp_path / "second"), "--work", str(tmp_path / "w2"),
                    "--init", str(first), "--add-piece", word, "--new-pieces-only", "2"])
    with pytest.raises(SystemExit, match="--encoder-only: .* Chinese characters"):
        train_main([*common, "--out", str(tmp_path / "second"), "--work", str(tmp_path / "w3"),
                    "--init", str(first), "--encoder-only"])
    assert not (tmp_path / "second" / "weights.safetensors").exists()  # refused before training


def test_retrain_piece_trains_only_that_existing_row(tmp_path):
    """``--retrain-piece WORD`` with ``--new-pieces-only``: the row of one existing piece learns
    on the pairs that have it, and every other weight, other rows included, stays bit for bit."""
    from safetensors.torch import load_file

    common, first, old, _ = _tiny_run_with_a_word_cut_in_two(tmp_path)
    word = next(w for w in WORDS if len(old.english.encode(w, add_eos=False)) == 1)
    row = old.english.encode(word, add_eos=False)[0]
    second = tmp_path / "second"
    train_main([*common, "--out", str(second), "--work", str(tmp_path / "w2"), "--init", str(first),
                "--retrain-piece", word, "--new-pieces-only", "2", "--lr-factor", "2"])
    before = load_file(str(first / "weights.safetensors"))
    after = load_file(str(second / "weights.safetensors"))
    assert after.keys() == before.keys()
    for name, tensor in before.items():
        if name != "src_embedding.tokens.weight":
            assert after[name].equal(tensor), name
    embedding_before = before["src_embedding.tokens.weight"]
    embedding_after = after["src_embedding.tokens.weight"]
    assert embedding_after.shape == embedding_before.shape  # no piece added
    others = [i for i in range(embedding_before.shape[0]) if i != row]
    assert embedding_after[others].equal(embedding_before[others])
    assert not embedding_after[row].equal(embedding_before[row])  # the named row learned
    assert Translator.load(second).english.tokenize(word) == old.english.tokenize(word)


def test_retrain_piece_is_refused_for_a_word_of_two_pieces_or_without_new_pieces_only(
        tmp_path, capsys):
    common, first, old, word = _tiny_run_with_a_word_cut_in_two(tmp_path)  # word: two pieces
    with pytest.raises(SystemExit, match="not one"):
        train_main([*common, "--out", str(tmp_path / "second"), "--work", str(tmp_path / "w2"),
                    "--init", str(first), "--retrain-piece", word, "--new-pieces-only", "2"])
    assert not (tmp_path / "second" / "weights.safetensors").exists()
    with pytest.raises(SystemExit):
        train_main([*common, "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w3"),
                    "--init", str(first), "--retrain-piece", "one"])
    assert "--retrain-piece needs --new-pieces-only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_main([*common, "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w3"),
                    "--retrain-piece", "one", "--new-pieces-only", "2"])
    assert "--new-pieces-only needs --init" in capsys.readouterr().err


def test_focus_trains_the_whole_model_on_a_words_pairs_and_some_others(tmp_path, capsys):
    """``--focus WORD --focus-copies C --replay N``: an epoch is the pairs with WORD, C times,
    plus N others drawn at random; every weight may move."""
    from safetensors.torch import load_file

    common, first, old, _ = _tiny_run_with_a_word_cut_in_two(tmp_path)
    word = next(w for w in WORDS if len(old.english.encode(w, add_eos=False)) == 1)
    second = tmp_path / "second"
    capsys.readouterr()
    train_main([*common, "--out", str(second), "--work", str(tmp_path / "w2"), "--init", str(first),
                "--focus", word, "--focus-copies", "2", "--replay", "5"])
    printed = capsys.readouterr().out
    focused = int(printed.split("focus: ")[1].split(" ")[0])
    assert focused > 0 and "× 2 + 5 others" in printed
    history = json.loads((second / "history.json").read_text(encoding="utf-8"))
    assert history["train_pairs"] == 2 * focused + 5
    before = load_file(str(first / "weights.safetensors"))
    after = load_file(str(second / "weights.safetensors"))
    assert sum(not after[n].equal(t) for n, t in before.items()) > len(before) // 2


def test_encoder_only_leaves_the_decoder_and_the_chinese_side_bit_for_bit(tmp_path):
    from safetensors.torch import load_file

    common, first, old, _ = _tiny_run_with_a_word_cut_in_two(tmp_path)
    second = tmp_path / "second"
    train_main([*common, "--out", str(second), "--work", str(tmp_path / "w2"), "--init", str(first),
                "--encoder-only", "--lr-factor", "2"])
    before = load_file(str(first / "weights.safetensors"))
    after = load_file(str(second / "weights.safetensors"))
    english = [n for n in before if n.startswith(("src_embedding.", "encoder_layers."))]
    assert english and all(not after[n].equal(before[n]) for n in english if "weight" in n)
    assert all(after[n].equal(before[n]) for n in before if n not in english)


def test_focus_is_refused_without_init_with_new_pieces_only_or_for_several_pieces(tmp_path, capsys):
    common, first, old, word = _tiny_run_with_a_word_cut_in_two(tmp_path)  # word: two pieces
    with pytest.raises(SystemExit, match="not one"):
        train_main([*common, "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w2"),
                    "--init", str(first), "--focus", word])
    for extra in (["--focus", "one"],
                  ["--init", str(first), "--focus", "one", "--retrain-piece", "one",
                   "--new-pieces-only", "2"],
                  ["--init", str(first), "--focus-copies", "2"],
                  ["--init", str(first), "--focus", "one", "--focus-copies", "0"],
                  ["--focus", "one", "--encoder-only"]):
        with pytest.raises(SystemExit):
            train_main([*common, "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w3"), *extra])
        assert "--focus" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_main([*common, "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w3"),
                    "--encoder-only"])
    assert "--encoder-only needs --init" in capsys.readouterr().err
    for extra in (["--replay", "5"],
                  ["--init", str(first), "--replay", "5", "--add-piece", "zyx",
                   "--new-pieces-only", "2"]):
        with pytest.raises(SystemExit):
            train_main([*common, "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w3"),
                        *extra])
        assert "--replay needs --init" in capsys.readouterr().err
    assert not (tmp_path / "o" / "weights.safetensors").exists()


def test_replay_alone_is_a_short_pass_over_pairs_drawn_at_random(tmp_path, capsys):
    """``--init CKPT --replay N`` without --focus: an epoch is N training pairs drawn at random
    (seeded: the same seed draws the same pairs), and the whole model trains on them."""
    from safetensors.torch import load_file

    common, first, _, _ = _tiny_run_with_a_word_cut_in_two(tmp_path)
    runs = []
    for name in ("second", "again"):
        out = tmp_path / name
        capsys.readouterr()
        train_main([*common, "--out", str(out), "--work", str(tmp_path / f"w-{name}"),
                    "--init", str(first), "--replay", "7"])
        assert "replay: 7 training examples drawn at random" in capsys.readouterr().out
        assert json.loads((out / "history.json").read_text(encoding="utf-8"))["train_pairs"] == 7
        runs.append(load_file(str(out / "weights.safetensors")))
    before = load_file(str(first / "weights.safetensors"))
    assert sum(not runs[0][n].equal(t) for n, t in before.items()) > len(before) // 2
    assert all(runs[0][n].equal(runs[1][n]) for n in before)


def test_add_piece_without_init_is_refused_before_any_training(tmp_path, capsys):
    with pytest.raises(SystemExit):
        train_main(["--data", str(tmp_path / "missing"), "--out", str(tmp_path / "o"),
                    "--work", str(tmp_path / "w"), "--add-piece", "ai"])
    assert "--add-piece needs --init" in capsys.readouterr().err


def test_a_run_killed_mid_epoch_resumes_where_it_last_saved(tmp_path, monkeypatch):
    """``--save-every`` writes the resumable state inside an epoch; a run that dies between two
    saves resumes at the last one, with the same shuffle, and ends with the weights an unbroken
    run ends with."""
    import pytest
    from safetensors.torch import load_file

    import model.training.train as train

    _write_synthetic_data(tmp_path / "data")
    common = ["--data", str(tmp_path / "data"), "--epochs", "2", "--batch-tokens", "150",
              "--warmup", "50", "--dropout", "0", "--d-model", "32", "--heads", "2", "--layers", "1",
              "--d-ff", "64", "--en-vocab", "60", "--test-size", "40", "--dev-size", "40",
              "--no-progress", "--threads", "1", "--narrow", "--average", "1", "--save-every", "4"]
    train_main([*common, "--out", str(tmp_path / "whole"), "--work", str(tmp_path / "w1")])

    real_loss, calls = train.smoothed_cross_entropy, []

    def dies_at_step_11(*args):
        calls.append(1)
        if len(calls) == 11:  # two steps after the save at step 8, before the epoch ends
            raise RuntimeError("killed")
        return real_loss(*args)

    monkeypatch.setattr(train, "smoothed_cross_entropy", dies_at_step_11)
    with pytest.raises(RuntimeError, match="killed"):
        train_main([*common, "--out", str(tmp_path / "broken"), "--work", str(tmp_path / "w2")])
    monkeypatch.setattr(train, "smoothed_cross_entropy", real_loss)
    train_main([*common, "--out", str(tmp_path / "broken"), "--work", str(tmp_path / "w2")])

    whole = json.loads((tmp_path / "whole" / "history.json").read_text())
    broken = json.loads((tmp_path / "broken" / "history.json").read_text())
    assert whole["epochs"][0]["step"] > 11  # the kill really fell inside the first epoch
    assert [e["step"] for e in broken["epochs"]] == [e["step"] for e in whole["epochs"]]
    assert [e["train_loss"] for e in broken["epochs"]] == [e["train_loss"] for e in whole["epochs"]]
    a = load_file(str(tmp_path / "whole" / "weights.safetensors"))
    b = load_file(str(tmp_path / "broken" / "weights.safetensors"))
    assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a)


def test_average_init_ships_the_mean_of_the_start_and_the_trained_weights(tmp_path):
    """``--average-init`` ships (start + trained) / 2, scores it on dev, and keeps the trained
    weights' own dev figures beside it; run again on the finished work folder, it only re-averages."""
    import torch
    from safetensors.torch import load_file

    _write_synthetic_data(tmp_path / "data")
    common = ["--data", str(tmp_path / "data"), "--batch-tokens", "150", "--warmup", "50",
              "--dropout", "0", "--test-size", "40", "--dev-size", "40", "--no-progress",
              "--threads", "1", "--average", "1", "--epochs", "1", "--narrow"]
    first = tmp_path / "first"
    train_main([*common, "--out", str(first), "--work", str(tmp_path / "w1"), "--d-model", "32",
                "--heads", "2", "--layers", "1", "--d-ff", "64", "--en-vocab", "60"])
    second = tmp_path / "second"
    train_main([*common, "--out", str(second), "--work", str(tmp_path / "w2"), "--init", str(first),
                "--lr-factor", "2", "--average-init"])
    start = load_file(str(first / "weights.safetensors"))
    trained = load_file(str(tmp_path / "w2" / "epoch001.safetensors"))
    shipped = load_file(str(second / "weights.safetensors"))
    assert shipped.keys() == trained.keys() == start.keys()
    # training moved the weights, so the mean is neither of the two
    assert any(not trained[key].equal(start[key]) for key in start)
    for key in shipped:
        expected = ((start[key].double() + trained[key].double()) / 2).float()
        assert torch.equal(shipped[key], expected), key
    final = json.loads((second / "history.json").read_text())["final"]
    assert final["weights"] == "mean of the --init weights and the last epoch"
    assert final["without_init"]["weights"] == "last epoch"
    assert 0 <= final["dev_bleu"] <= 100 and 0 <= final["without_init"]["dev_bleu"] <= 100
    # resuming the finished work folder with the flag re-derives the same weights
    train_main([*common, "--out", str(tmp_path / "again"), "--work", str(tmp_path / "w2"),
                "--init", str(first), "--lr-factor", "2", "--average-init"])
    again = load_file(str(tmp_path / "again" / "weights.safetensors"))
    assert all(torch.equal(again[k], shipped[k]) for k in shipped)


def test_average_init_without_init_is_refused_before_any_training(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit):
        train_main(["--data", str(tmp_path / "missing"), "--out", str(tmp_path / "o"),
                    "--work", str(tmp_path / "w"), "--average-init"])
    assert "--average-init needs --init" in capsys.readouterr().err


def test_a_drop_stops_share_outside_0_to_1_is_refused_before_any_training(tmp_path, capsys):
    import pytest

    for share in ("-0.1", "1.5"):
        with pytest.raises(SystemExit):
            train_main(["--data", str(tmp_path / "missing"), "--out", str(tmp_path / "o"),
                        "--work", str(tmp_path / "w"), "--drop-stops", share])
        assert "--drop-stops takes a share between 0 and 1" in capsys.readouterr().err


def test_a_negative_names_or_titles_limit_is_refused_before_any_training(tmp_path, capsys):
    import pytest

    for flag in ("--names-limit", "--titles-limit", "--acronyms-limit"):
        with pytest.raises(SystemExit):
            train_main(["--data", str(tmp_path / "missing"), "--out", str(tmp_path / "o"),
                        "--work", str(tmp_path / "w"), flag, "-5"])
        assert "--names-limit and --titles-limit take a number of pairs ≥ 0" in capsys.readouterr().err


def test_continuing_a_checkpoint_with_other_held_out_splits_is_refused(tmp_path, capsys):
    """Another --split-seed (or, for runs from before it, another --seed) or other split sizes
    would draw other dev/test sentences, so the run would train on the checkpoint's held-out
    ones; the arguments are refused before any data is read."""
    import pytest

    from model.training.train import parse_args

    init = tmp_path / "init"
    init.mkdir()
    common = ["--data", str(tmp_path / "missing"), "--out", str(tmp_path / "o"),
              "--work", str(tmp_path / "w"), "--init", str(init)]
    for settings, argv, said in (
        ({"seed": 12, "test_size": 1000, "dev_size": 500}, [], "split_seed 12 (here 13)"),
        ({"split_seed": 13, "seed": 12, "test_size": 1000, "dev_size": 500},
         ["--split-seed", "7"], "split_seed 13 (here 7)"),
        ({"seed": 13, "test_size": 40, "dev_size": 500}, [], "test_size 40 (here 1000)"),
    ):
        (init / "history.json").write_text(json.dumps({"settings": settings}))
        with pytest.raises(SystemExit):
            parse_args([*common, *argv])
        assert said in capsys.readouterr().err
    # the training seed alone may change: shuffles and draws differ, the splits do not
    (init / "history.json").write_text(json.dumps(
        {"settings": {"seed": 13, "test_size": 1000, "dev_size": 500}}))
    args = parse_args([*common, "--seed", "12"])
    assert (args.seed, args.split_seed) == (12, 13)
    (init / "history.json").unlink()  # nothing says how it was split: nothing to compare
    assert parse_args(common).split_seed == 13


def test_evaluation_rebuilds_the_splits_from_split_seed():
    from model.training.data import split_seed
    from model.training.evaluate import split_settings

    assert split_seed({"seed": 12, "split_seed": 0}) == 0
    assert split_seed({"seed": "12"}) == 12 and split_seed({}) is None

    assert split_settings({"seed": 12, "split_seed": 13})["seed"] == 13
    assert split_settings({"seed": 12})["seed"] == 12  # a run from before --split-seed
    assert split_settings({})["seed"] == 13


def test_the_timeline_packer_scores_the_dev_sentences_its_run_held_out(tmp_path):
    """model/training/snapshots.py rebuilds a run's dev set from ``split_seed``, not ``seed``."""
    from model.training.data import load_pairs, split_pairs
    from model.training.snapshots import dev_pairs

    _write_synthetic_data(tmp_path / "data")
    settings = {"seed": 5, "split_seed": 13, "test_size": 40, "dev_size": 40, "narrow": True}
    expected = split_pairs(load_pairs(tmp_path / "data", wide=False), seed=13, n_test=40,
                           n_dev=40, n_test_hsk=40).dev_mix()
    other = split_pairs(load_pairs(tmp_path / "data", wide=False), seed=5, n_test=40,
                        n_dev=40, n_test_hsk=40).dev_mix()
    assert expected != other  # the two seeds hold out different sentences here
    assert dev_pairs(tmp_path / "data", settings) == expected


def test_learning_rate_decays_linearly_to_zero_when_the_run_length_is_known():
    """Warmup is the paper's either way; with a total the rate then falls on a straight line from
    the warmup's peak to zero at the last step."""
    from model.training.schedule import learning_rate, noam_lr

    for step in (1, 50, 100):
        assert learning_rate(step, 64, 100, 2.0, total=400) == noam_lr(step, 64, 100, 2.0)
    peak = noam_lr(100, 64, 100, 2.0)
    assert learning_rate(250, 64, 100, 2.0, total=400) == pytest.approx(peak / 2)
    assert learning_rate(400, 64, 100, 2.0, total=400) == 0.0
    assert learning_rate(401, 64, 100, 2.0, total=400) == 0.0
    assert learning_rate(250, 64, 100, 2.0) == noam_lr(250, 64, 100, 2.0)


def test_a_linear_decay_run_records_its_length_and_ends_near_zero(tmp_path):
    """`--decay linear` plans the run's steps from --epochs, records them in history.json, and the
    rates the loop logged lie on that schedule (what /training draws)."""
    from model.training.schedule import learning_rate, run_total_steps

    _write_synthetic_data(tmp_path / "data")
    out = tmp_path / "checkpoint"
    train_main([
        "--data", str(tmp_path / "data"), "--out", str(out), "--work", str(tmp_path / "work"),
        "--epochs", "3", "--batch-tokens", "150", "--warmup", "20", "--decay", "linear",
        "--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--dropout", "0",
        "--en-vocab", "60", "--average", "1", "--test-size", "40", "--dev-size", "40",
        "--no-progress", "--threads", "1", "--narrow",
    ])
    history = json.loads((out / "history.json").read_text())
    total = run_total_steps(history["settings"])
    last = history["epochs"][-1]["step"]
    assert total and abs(total - last) <= 3, (total, last)  # batches per epoch vary by a shuffle
    for logged in history["steps"]:
        assert logged["lr"] == pytest.approx(learning_rate(logged["step"], 32, 20, 1.0, total))
    after_warmup = [s["lr"] for s in history["steps"] if s["step"] > 20]
    assert after_warmup == sorted(after_warmup, reverse=True) and len(after_warmup) >= 2
    assert learning_rate(last, 32, 20, 1.0, total) <= 0.1 * learning_rate(20, 32, 20, 1.0)


def test_a_resumed_linear_run_keeps_the_schedule_it_planned(tmp_path, monkeypatch):
    """A linear-decay run stopped mid-epoch and started again with another --epochs stays on the
    schedule recorded in its history.json (the one /training draws), not a re-planned one."""
    import model.training.train as train
    from model.training.schedule import learning_rate, run_total_steps

    _write_synthetic_data(tmp_path / "data")
    common = ["--data", str(tmp_path / "data"), "--batch-tokens", "150", "--warmup", "10",
              "--decay", "linear", "--dropout", "0", "--d-model", "32", "--heads", "2",
              "--layers", "1", "--d-ff", "64", "--en-vocab", "60", "--test-size", "40",
              "--dev-size", "40", "--no-progress", "--threads", "1", "--narrow", "--average", "1",
              "--save-every", "4", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "w")]
    real_loss, calls = train.smoothed_cross_entropy, []

    def dies_at_step_11(*args):
        calls.append(1)
        if len(calls) == 11:
            raise RuntimeError("killed")
        return real_loss(*args)

    monkeypatch.setattr(train, "smoothed_cross_entropy", dies_at_step_11)
    with pytest.raises(RuntimeError, match="killed"):
        train_main([*common, "--epochs", "2"])
    monkeypatch.setattr(train, "smoothed_cross_entropy", real_loss)
    train_main([*common, "--epochs", "3"])
    history = json.loads((tmp_path / "out" / "history.json").read_text())
    total = run_total_steps(history["settings"])
    assert total < history["epochs"][-1]["step"]  # planned for 2 epochs, ran 3: the rate hit zero
    for logged in history["steps"]:
        assert logged["lr"] == pytest.approx(learning_rate(logged["step"], 32, 10, 1.0, total))


def test_a_latin_short_share_outside_0_to_1_is_refused_before_any_training(tmp_path, capsys):
    for share in ("-0.5", "2"):
        with pytest.raises(SystemExit):
            train_main(["--data", str(tmp_path / "missing"), "--out", str(tmp_path / "o"),
                        "--work", str(tmp_path / "w"), "--latin-short", share])
        assert "--latin-short takes a share between 0 and 1" in capsys.readouterr().err


KEEP_FREED = """
import resource, sys, torch
from model.training.train import keep_freed_memory
applied = keep_freed_memory() if sys.argv[1] == "keep" else None
torch.empty(3000, 4256).fill_(1.0)  # the logits of a 3,000-token batch, 51 MB
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    torch.empty(3000, 4256).fill_(1.0)
print(applied, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="glibc's malloc")
def test_training_keeps_freed_memory_so_a_steps_large_tensors_fault_no_new_pages():
    """A 51 MB block freed and allocated again ten times: by default glibc maps it afresh every
    time (12,500 pages faulted in each); after keep_freed_memory() the freed memory is reused."""
    import subprocess
    import sys

    def faults(mode: str) -> tuple[str, int]:
        out = subprocess.run([sys.executable, "-c", KEEP_FREED, mode], capture_output=True,
                             text=True, check=True).stdout.split()
        return out[0], int(out[1])

    assert faults("default")[1] > 10 * 10_000  # ~12,500 pages a block, every time
    applied, kept = faults("keep")
    assert applied == "True" and kept < 2 * 12_500  # at most a block's worth once, not ten


def test_acronym_terms_outside_a_share_or_without_acronym_swaps_is_refused(tmp_path, capsys):
    import pytest

    base = ["--data", str(tmp_path / "missing"), "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w")]
    with pytest.raises(SystemExit):
        train_main([*base, "--vary-acronyms", "1", "--acronym-terms", "1.5"])
    assert "--acronym-terms takes a share between 0 and 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_main([*base, "--acronym-terms", "0.5"])
    assert "--acronym-terms needs --vary-acronyms" in capsys.readouterr().err
