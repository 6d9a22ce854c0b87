"""Every page in headless Chromium against ``python -m app --model`` on a tiny random Hugging Face
Marian folder (tests/marian_folder.py): no console errors, no error box, figures drawn, the footer
names the model, and no request leaves localhost."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.e2e.conftest import shot, wait_idle

pytestmark = pytest.mark.e2e
CAT = "The cat sits on the mat."
PAGES = ["/", "/pipeline", "/tokens", "/embeddings", "/attention", "/coreference", "/decode",
         "/kv-cache", "/training", "/scale", "/tour", "/docs"]


# the cat sentence has no pronoun: /coreference keeps it and says so, so it measures this one
SENTENCES = {"/coreference": "The woman said that she was tired."}


@pytest.mark.parametrize("path", PAGES)
def test_page_renders_on_a_marian_model(page, marian_server, tiny_marian, path):
    page.goto(f"{marian_server}{path}?text={quote(SENTENCES.get(path, CAT))}")
    wait_idle(page)
    assert page.locator("#error").is_hidden(), page.locator("#error").text_content()
    line = page.locator("#model-line").text_content()
    assert tiny_marian.name in line and "Marian" in line
    if path not in ("/docs", "/tour"):
        assert page.locator(".main-svg, svg, canvas").count() > 0, path
    shot(page, f"marian{path.replace('/', '-') if path != '/' else '-xray'}")


def test_decode_with_beam_search(page, marian_server):
    page.goto(f"{marian_server}/decode?text={quote(CAT)}&strategy=beam")
    wait_idle(page)
    assert page.locator("#error").is_hidden()


def test_training_says_what_is_ours(page, marian_server):
    page.goto(f"{marian_server}/training?text={quote(CAT)}&reference={quote('猫坐在垫子上。')}")
    wait_idle(page)
    assert "pretrained Marian model" in page.locator("#marian-training").text_content()
    assert "Mean cross-entropy" in page.locator("#loss-line").text_content()
