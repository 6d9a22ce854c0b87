"""/training in a browser: the held-out evaluation from eval.json, before/after when eval.json
keeps the previous checkpoint's figures, and legible on a phone (no sideways page scroll)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.app.test_training import DECODINGS, METRIC_KEYS, SPLITS, made_up_evaluation
from tests.conftest import warm_page
from tests.e2e.conftest import running_server, shot


@pytest.fixture(scope="module")
def evaluated_server(tiny_checkpoint, tmp_path_factory):
    """A server on a copy of the tiny checkpoint whose eval.json has made-up figures and a
    ``previous`` part (with the learner's splits: learner_evaluation), and whose history.json says
    it was warm-started: one server for this file."""
    folder = tmp_path_factory.mktemp("evaluated") / "checkpoint"
    shutil.copytree(tiny_checkpoint, folder)
    (folder / "eval.json").write_text(json.dumps(learner_evaluation(), ensure_ascii=False),
                                      encoding="utf-8")
    history = json.loads((folder / "history.json").read_text(encoding="utf-8"))
    history["init"] = {"from": "earlier", "epochs": 24, "total_minutes": 72.5, "train_pairs": 31508}
    history["train_pairs"] = 12345
    (folder / "history.json").write_text(json.dumps(history), encoding="utf-8")
    with running_server(folder, "e2e-training-server.log") as url:
        yield url


def shown(value: float, signed: bool = False) -> str:
    text = f"{abs(value):.2f}"
    return ("−" if value < 0 else "+" if signed and value > 0 else "") + text


def test_before_and_after_figures_are_eval_jsons(page, evaluated_server):
    evaluation = made_up_evaluation(True)
    page.goto(f"{evaluated_server}/training#eval-title")  # the address opens the folded section
    page.wait_for_selector("#eval-sets article")
    assert page.locator("#eval-previous").inner_text().count("made-up earlier checkpoint") == 1
    for name in SPLITS:
        table = page.locator(f'#eval-sets article[data-set="{name}"] table')
        assert table.locator("thead th").all_inner_texts()[1:] == ["before", "now", "change"]
        rows = [r for r in table.locator("tbody tr").all() if r.locator("td").count()]
        now = [evaluation["sets"][name][d][m] for m in METRIC_KEYS for d in DECODINGS]
        before = [evaluation["previous"]["sets"][name][d][m] for m in METRIC_KEYS for d in DECODINGS]
        cells = [r.locator("td").all_inner_texts() for r in rows]
        assert cells == [[shown(b), shown(n), shown(round(n - b, 2), True)]
                         for b, n in zip(before, now, strict=True)]
    examples = page.locator('#eval-sets article[data-set="hsk_test"] details')
    examples.locator("summary").click()
    text = examples.inner_text()
    example = evaluation["sets"]["hsk_test"]["examples"][0]
    assert example["english"] in text and example["reference"] in text and example["beam4"] in text
    page.locator("#eval-probe > summary").click()
    categories = page.locator("#probe-categories tbody tr").first.locator("td").all_inner_texts()
    numbers = evaluation["probe"]["categories"]["numbers"]
    assert categories[1] == f"{shown(numbers['greedy']['bleu'])} " \
                            f"({shown(evaluation['previous']['probe']['categories']['numbers']['greedy']['bleu'])})"
    story = page.locator("#story").text_content()  # in the folded "real training curves"
    assert "Warm-started" in story and "12,345" in story
    shot(page, "training-eval-1280")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_evaluation_fits_a_phone(warm_context, evaluated_server, lang):
    page = warm_page(warm_context, 390, 844, lang, evaluated_server)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{evaluated_server}/training")
    page.locator("#evaluation > summary").click()  # folded on arrival
    page.locator("#eval-probe > summary").click()
    page.wait_for_selector("#probe-categories tbody tr")
    page.locator("#eval-sets details").first.locator("summary").click()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    for article in page.locator("#eval-sets article").all():  # each split's table fits its card
        assert article.evaluate("a => a.scrollWidth <= a.clientWidth")
    shot(page, f"training-eval-390-{lang}")
    page.close()
    assert errors == []


def test_without_test_sets_the_page_says_so(page, server):
    """The tiny checkpoint's eval.json has no test sets and no ``previous``."""
    page.goto(f"{server}/training")
    page.locator("#evaluation > summary").click()  # folded on arrival
    page.wait_for_selector("#eval-sets p.muted")
    assert "python -m model.training.evaluate" in page.locator("#eval-sets").inner_text()
    assert page.locator("#eval-previous").is_hidden()
    assert page.locator("#eval-probe").is_hidden()


def learner_evaluation() -> dict:
    """The made-up eval.json plus the everyday split typed without its final stop and the
    learner probe, each with its earlier checkpoint's figures."""
    from tests.app.test_training import made_up_figures

    evaluation = made_up_evaluation(True)
    evaluation["no_stops"] = {"tatoeba_test": made_up_figures(9.75)}
    evaluation["previous"]["no_stops"] = {"tatoeba_test": made_up_figures(4.5)}
    outputs = [{"category": c, "english": f"Learner sentence {i}", "reference": f"学习者{i}",
                "greedy": f"学{i}", "beam4": f"学习{i}"} for i, c in enumerate(["titles", "no_stop"])]
    evaluation["probe_learner"] = {"pairs": 2, **made_up_figures(40.0), "outputs": outputs,
                                   "categories": {"titles": {"pairs": 1, **made_up_figures(30.0)},
                                                  "no_stop": {"pairs": 1, **made_up_figures(50.0)}}}
    evaluation["previous"]["probe_learner"] = {
        **made_up_figures(35.0), "outputs": [{**outputs[0], "greedy": "旧的"}],
        "categories": {"titles": made_up_figures(20.0), "no_stop": made_up_figures(45.0)}}
    return evaluation


@pytest.fixture()
def learner_server(evaluated_server):
    """The same server: its eval.json is learner_evaluation()."""
    return evaluated_server


@pytest.mark.parametrize(("lang", "card_title", "section_title", "category"), [
    ("en", "Tatoeba: everyday sentences, typed without the final full stop", "learner",
     "titles before names"),
    ("zh", "Tatoeba：日常句子（输入时句末不带句号）", "学习者", "名字前的称谓"),
])
def test_the_no_stop_card_and_the_learner_probe_show_eval_jsons_figures(
        phone, learner_server, lang, card_title, section_title, category):
    evaluation = learner_evaluation()
    page = phone  # fails the test on any uncaught script error
    page.context.add_cookies([{"name": "lang", "value": lang, "url": learner_server}])
    page.goto(f"{learner_server}/training")
    page.locator("#evaluation > summary").click()  # folded on arrival
    card = page.locator('#eval-sets article[data-set="tatoeba_test-no-stops"]')
    card.wait_for()
    assert card.locator("h3").inner_text() == card_title
    rows = [r for r in card.locator("tbody tr").all() if r.locator("td").count()]
    first = rows[0].locator("td").all_inner_texts()  # BLEU · greedy
    before = evaluation["previous"]["no_stops"]["tatoeba_test"]["greedy"]["bleu"]
    now = evaluation["no_stops"]["tatoeba_test"]["greedy"]["bleu"]
    assert first == [shown(before), shown(now), shown(round(now - before, 2), True)]

    learner = page.locator("#eval-learner")
    assert learner.is_visible() and page.locator("#eval-probe").is_visible()
    assert section_title in learner.locator("summary").first.inner_text().lower()
    learner.locator("summary").first.click()
    page.wait_for_selector("#learner-categories tbody tr")
    categories = page.locator("#learner-categories tbody tr")
    assert categories.count() == 2
    cells = categories.first.locator("td").all_inner_texts()
    assert categories.first.locator("th").inner_text() == category and cells[0] == "1"  # pairs
    titles = evaluation["probe_learner"]["categories"]["titles"]["greedy"]["bleu"]
    titles_before = evaluation["previous"]["probe_learner"]["categories"]["titles"]["greedy"]["bleu"]
    assert cells[1] == f"{shown(titles)} ({shown(titles_before)})"
    overall = [r for r in page.locator("#learner-overall tbody tr").all() if r.locator("td").count()]
    overall = overall[0].locator("td").all_inner_texts()
    assert overall[:2] == [shown(evaluation["previous"]["probe_learner"]["greedy"]["bleu"]),
                           shown(evaluation["probe_learner"]["greedy"]["bleu"])]
    page.locator("#learner-examples summary").click()
    text = page.locator("#learner-examples").inner_text()
    for output in evaluation["probe_learner"]["outputs"]:
        assert output["english"] in text and output["greedy"] in text and output["beam4"] in text
    assert "旧的" in text  # the earlier checkpoint's output beside today's
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(learner, f"training-learner-390-{lang}")  # the section alone: the whole page is 8,000 px tall
