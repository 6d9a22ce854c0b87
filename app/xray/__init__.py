"""The x-ray page's data contract (``app/pages/xray.py`` serves it; ``static/js/xray/data.js``
reads it): the packed answers' layout (``wire.py``), the colour strips and their Add & Norm
corrections (``strips.py``) and what each answer holds (``view.py``). Numbers come from the
trace's recorded pass as numpy arrays (``model/explain/arrays.py``); torch stays in ``model/``."""

from app.xray.strips import norm_prediction, quantize, shown_ranges, strip_codes
from app.xray.view import (
    BARS,
    LINE_FROM,
    NAMED,
    NORMS,
    SAMPLING_ROWS,
    decoder_strips_view,
    heads_view,
    logits_view,
    model_layout,
    page_mean,
    shown_means,
    unpack_all,
    view,
)
from app.xray.wire import pack, unpack

__all__ = ["BARS", "LINE_FROM", "NAMED", "NORMS", "SAMPLING_ROWS", "decoder_strips_view",
           "heads_view", "logits_view", "model_layout", "norm_prediction", "pack", "page_mean",
           "quantize", "shown_means", "shown_ranges", "strip_codes", "unpack", "unpack_all", "view"]
