"""Shared fixtures: a tiny checkpoint made from sentences written here (never ../shared)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from model.tokenizer import ChineseTokenizer, EnglishTokenizer
from model.training.loop import state_for_saving
from model.transformer import Transformer, TransformerConfig
from model.translator import Translator
from tests import run_shared

SHIPPED_CHECKPOINT = Path(__file__).resolve().parents[1] / "model" / "checkpoints"
CHROMIUM = "/usr/bin/chromium"
# --process-per-site: every page a test opens on a server shares one renderer process, which keeps
# the compiled plotly.js and page scripts, instead of a new renderer per page (spawned, started,
# scripts loaded again): 16 new pages of the tiny model, each loaded and closed, took 12.6 CPU-s
# against 19.4 without it (Chromium's and the server's, /proc/stat, three rounds alike)
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--process-per-site"]

MARIAN_NAME = "opus-mt-en-zh-tiny"  # the tiny Marian folders' name, as a downloaded one is named
TINY_PAIRS = [
    ("The cat sits on the mat.", "猫坐在垫子上。"),
    ("The dog runs in the park.", "狗在公园里跑。"),
    ("I like green tea.", "我喜欢绿茶。"),
    ("She reads a book every day.", "她每天读一本书。"),
    ("We are students.", "我们是学生。"),
    ("Where is the station?", "车站在哪里？"),
    ("The weather is nice today.", "今天天气很好。"),
    ("He gave her a flower because she was sad.", "他给了她一朵花，因为她很难过。"),
]


def make_tiny_checkpoint(path: Path, seed: int = 0, learn_steps: int = 0, **overrides) -> Path:
    """Write a small model with real tokenizers to ``path`` in the shipped format: random, or with
    ``learn_steps`` Adam steps on TINY_PAIRS (``learn_pairs``)."""
    from safetensors.torch import save_file

    torch.manual_seed(seed)
    path.mkdir(parents=True, exist_ok=True)
    english = EnglishTokenizer.train([e for e, _ in TINY_PAIRS] * 3, vocab_size=120)
    chinese = ChineseTokenizer.train(z for _, z in TINY_PAIRS)
    settings = dict(
        d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0
    )
    settings.update(overrides)
    config = TransformerConfig(english.vocab_size, chinese.vocab_size, **settings)
    model = Transformer(config)
    if learn_steps:
        learn_pairs(model, english, chinese, learn_steps)
    save_file(state_for_saving(model), str(path / "weights.safetensors"))
    config.save(path / "config.json")
    english.save(path / "tokenizer_en.json")
    chinese.save(path / "vocab_zh.json")
    history = {
        "steps": [{"step": s, "loss": 5.0 / s, "lr": 1e-3 * s / 10, "grad_norm": 1.0, "epoch": 1}
                  for s in range(1, 11)],
        "epochs": [{"epoch": 1, "step": 10, "train_loss": 3.0, "dev_bleu": 1.0, "dev_chrf": 2.0,
                    "minutes": 0.1}],
    }
    (path / "history.json").write_text(json.dumps(history), encoding="utf-8")
    (path / "eval.json").write_text(json.dumps({"test": {"bleu": 1.0, "chrf": 2.0}}), "utf-8")
    return path


def learn_pairs(model: Transformer, english, chinese, steps: int) -> None:
    """Teacher-forced Adam steps on all of TINY_PAIRS at once: after ~200 the model translates them
    and, like a real model, ends every translation with <eos> within a few tokens. (A random model
    runs every translation to max_len, 128 by default, so every page it serves draws 128 steps.)"""
    from model.training.loop import collate, smoothed_cross_entropy

    src, tgt_in, labels = collate([(english.encode(e), chinese.encode(z)) for e, z in TINY_PAIRS])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = smoothed_cross_entropy(model(src, tgt_in), labels, smoothing=0.0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


# Files whose tests pytest-xdist may hand to different workers: long, independent tests that share
# only session fixtures (or a module fixture cheap to make twice), e.g. one browser sweep per page.
# Scheduled after the whole files (pytest-xdist orders units by their number of tests), they fill
# the end of the run on whichever worker is free. Every other file runs whole on one worker
# (--dist loadfile): its module fixtures set up once, its order kept.
SPREAD = {
    "tests/e2e/test_accessibility.py",
    "tests/e2e/test_folds.py",
    "tests/e2e/test_learner.py",
    "tests/prod/test_schemathesis.py",  # its module fixture: the tiny model's app, ~1 s
    "tests/prod/test_xss_browser.py",
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, except that each test of a SPREAD file is a unit of its own. (Not --dist
    loadgroup: pytest-xdist 3.8 marks a group by rewriting ``item._nodeid``, which pytest 9.2 no
    longer reads, so every test would be a unit of its own.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LoadFileUnlessSpread(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if path in SPREAD else path

    return LoadFileUnlessSpread(config, log)


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the run's controller (or pytest without workers)
        run_shared.begin_run()


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        run_shared.end_run()


@pytest.fixture(scope="session")
def tiny_checkpoint() -> Path:
    """The tiny model most app and browser tests serve: it has learned TINY_PAIRS, so its
    translations end as a real model's do (the figures are a few steps long, not 128). Made once
    per run (~4 CPU-s), shared by the workers: no test writes into it (those that change a
    checkpoint change a copy)."""
    return run_shared.once("tiny-checkpoint", lambda folder: make_tiny_checkpoint(folder, learn_steps=200))


@pytest.fixture(scope="session")
def tiny_translator(tiny_checkpoint) -> Translator:
    return Translator.load(tiny_checkpoint)


@pytest.fixture(scope="session")
def shipped_translator() -> Translator:
    if not (SHIPPED_CHECKPOINT / "weights.safetensors").is_file():
        pytest.fail("the shipped checkpoint is missing from model/checkpoints")
    return Translator.load(SHIPPED_CHECKPOINT)


@pytest.fixture(scope="session")
def tiny_marian() -> Path:
    """A tiny random Hugging Face Marian folder (tests/marian_folder.py), built without a download,
    once per run."""
    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    from tests.marian_folder import make_tiny_marian

    folder = run_shared.once("tiny-marian", lambda folder: make_tiny_marian(folder / MARIAN_NAME))
    return folder / MARIAN_NAME


@pytest.fixture(scope="session")
def hf_export(tmp_path_factory, shipped_translator) -> Path:
    """The shipped checkpoint as a Hugging Face Marian folder (model/adapters/export_hf.py)."""
    pytest.importorskip("transformers")
    from model.adapters.export_hf import export

    return export(shipped_translator, tmp_path_factory.mktemp("export") / "inside-transformer-hf")


@pytest.fixture(scope="session")
def tiny_recipe_run(tmp_path_factory):
    """One run of tests/training_run.py's tiny recipe (2 + 1 epochs on counting data) for the whole
    test run: the tests that only read a finished run share it instead of training their own."""
    from tests.training_run import make_tiny_run

    return make_tiny_run(tmp_path_factory.mktemp("tiny-recipe"))


@pytest.fixture(scope="session")
def playwright():
    """Playwright's driver, one per worker (it allows one per thread)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/test.sh does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture(scope="session")
def browser(playwright):
    """Debian's headless Chromium, one for the whole run (browser tests in tests/e2e and tests/prod):
    for the tests that need a context of their own (its own viewport default, CSP bypassed)."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def warm_context(playwright, tmp_path_factory):
    """A second Chromium, with a profile on disk, whose pages most browser tests open (``page``,
    ``wide``, ``phone``, ``warm_page``). A profile on disk keeps V8's compiled code between pages,
    which a profile in memory (``browser.new_context``) does not, so plotly.js (3.5 MB) and the page
    scripts are compiled once per worker, not once per test: beside a training run on the 2-core
    machine a page of the tiny model loaded in 1.4 s on average against 2.8 s in a fresh context
    and 2.2 s in a new page of a context in memory (``python -m bench.browser_contexts``). (Since
    --process-per-site the two load alike there, 0.76 s against 0.78; yet tests/e2e and the XSS
    sweep with this context made in memory by the one ``browser`` took 699 busy CPU-s against 628
    as it is, one run each.) Each
    test gets a new page of its own (``warm_page``) with no cookies."""
    context = playwright.chromium.launch_persistent_context(
        tmp_path_factory.mktemp("chromium-profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS,
        viewport={"width": 1280, "height": 800}, locale="en-US")
    yield context
    context.close()


def warm_page(context, width: int = 1280, height: int = 800, lang: str | None = None, server=None):
    """A new page of ``context`` at that size, after the last test's cookies are cleared (the
    pages share nothing else that outlives them: the app keeps no storage in the browser, and
    only static files carry cache headers); with ``lang``, the language cookie for ``server``."""
    context.clear_cookies()
    if lang is not None:
        context.add_cookies([{"name": "lang", "value": lang, "url": server}])
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": height})
    page.in_flight = track_requests(page)  # what tests/e2e/conftest.py's wait_idle waits on
    return page


def track_requests(page) -> set:
    """The page's requests still in flight, kept up to date from Playwright's events."""
    in_flight: set = set()
    page.on("request", lambda r: in_flight.add(r))
    page.on("requestfinished", lambda r: in_flight.discard(r))
    page.on("requestfailed", lambda r: in_flight.discard(r))
    return in_flight


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on the test (``item.report_call``…), for fixtures that act on a failure
    (tests/e2e/conftest.py saves a failed browser test's page)."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report
