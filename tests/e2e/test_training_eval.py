"""/training in a browser: the held-out evaluation from eval.json, before/after when eval.json
keeps the previous checkpoint's figures, and legible on a phone (no sideways page scroll)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.app.test_training import DECODINGS, METRIC_KEYS, SPLITS, made_up_evaluation
from tests.e2e.conftest import running_server, shot


@pytest.fixture(scope="module")
def evaluated_server(tiny_checkpoint, tmp_path_factory):
    """A server on a copy of the tiny checkpoint whose eval.json has made-up figures and a
    ``previous`` part, and whose history.json says it was warm-started."""
    folder = tmp_path_factory.mktemp("evaluated") / "checkpoint"
    shutil.copytree(tiny_checkpoint, folder)
    (folder / "eval.json").write_text(json.dumps(made_up_evaluation(True), ensure_ascii=False),
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
def test_evaluation_fits_a_phone(browser, evaluated_server, lang):
    context = browser.new_context(viewport={"width": 390, "height": 844}, locale="en-US")
    context.add_cookies([{"name": "lang", "value": lang, "url": evaluated_server}])
    page = context.new_page()
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
    context.close()
    assert errors == []


def test_without_test_sets_the_page_says_so(page, server):
    """The tiny checkpoint's eval.json has no test sets and no ``previous``."""
    page.goto(f"{server}/training")
    page.locator("#evaluation > summary").click()  # folded on arrival
    page.wait_for_selector("#eval-sets p.muted")
    assert "python -m model.training.evaluate" in page.locator("#eval-sets").inner_text()
    assert page.locator("#eval-previous").is_hidden()
    assert page.locator("#eval-probe").is_hidden()
