"""Start-up freezes what it loaded, so Python's cyclic garbage collector stops walking the model
and the app in every full collection (one such walk cost 1.3 s under load: bench/README.md)."""

from __future__ import annotations

import gc

from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings


def test_start_up_freezes_what_it_loaded_and_shut_down_unfreezes_it(tiny_checkpoint, tiny_translator):
    gc.unfreeze()  # whatever an earlier app in this process left
    app = create_app(Settings(checkpoint=tiny_checkpoint), translator=tiny_translator)
    with TestClient(app):
        assert gc.get_freeze_count() > 10_000  # the model, the pages, the libraries loaded by then
        # a collection walks only what gc.get_objects() lists: the loaded model is no longer there
        assert not any(obj is tiny_translator for obj in gc.get_objects())
    # closed again (the tests make many apps): its objects collectable as before
    assert gc.get_freeze_count() == 0
