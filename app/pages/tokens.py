"""/tokens — English sub-word pieces and Chinese characters become ids; a padded mini-batch with
the reader's sentence, its labels (the decoder input shifted by one) and its three masks."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from app.api import timed
from app.deps import EngineDep, LanguageDep, TranslatorDep, page_text
from app.layout import render_page
from app.palette import PLOT_FONT_PX
from app.plots import base_layout, category_axis, plain_axis, unique_labels
from app.schemas import TRACE_ERRORS, TraceRequest
from model.api import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Translator

router = APIRouter()
PageText = page_text("tokens")

# The batch is the reader's sentence plus these (source, human reference) pairs, one shorter and
# one longer, so padding shows up on both sides.
BATCH_COMPANIONS = [
    ("We are students.", "我们是学生。"),
    ("The weather is very nice today, so we will walk to the park after lunch.",
     "今天天气很好，所以午饭后我们会走路去公园。"),
]
MASK_SCALE = [[0, "#3b3b3b"], [0.5, "#3b3b3b"], [0.5, "#56B4E9"], [1, "#56B4E9"]]
BATCH_SCALE = [[0, "#d9d9d9"], [1, "#cfe8f7"]]
BATCH_CELL_PX = 46  # a batch cell's least width: "students" or "<pad>" over its id, at 11 px
BATCH_MARGIN_PX = 100  # the row names beside the cells


@router.get("/tokens", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep) -> HTMLResponse:
    return render_page(request, "tokens", lang)


@router.post("/api/figures/tokens", responses=TRACE_ERRORS, tags=["figures"])
def tokens_figures(request: TraceRequest, engine: EngineDep, translator: TranslatorDep,
                   t: PageText, response: Response) -> dict:
    """Token pieces and ids, a padded mini-batch with the sentence, and its three masks."""
    trace, model_ms = engine.trace(request)
    sources = [trace.text] + [source for source, _ in BATCH_COMPANIONS]
    targets = [trace.translation] + [target for _, target in BATCH_COMPANIONS]
    batch = padded_batch(translator, sources, targets)
    rows = [t("tokens.yours")] + [t("tokens.row", n=i + 2) for i in range(len(BATCH_COMPANIONS))]
    mask_words = {"allowed": t("tokens.allowed"), "blocked": t("tokens.blocked"),
                  "labels": (t("tokens.query"), t("tokens.key"))}
    masks = []
    for row in range(len(sources)):
        src, dec = batch["source_tokens"][row], batch["decoder_tokens"][row]
        masks.append({
            "padding": mask_heatmap(batch["encoder_mask"][row], src, src,
                                    t("tokens.mask.padding"), **mask_words),
            "causal": mask_heatmap(batch["decoder_mask"][row], dec, dec,
                                   t("tokens.mask.causal"), **mask_words),
            "cross": mask_heatmap(batch["cross_mask"][row], dec, src,
                                  t("tokens.mask.cross"), **mask_words),
        })
    padded = sum(r.count(0) for r in batch["source_padding"] + batch["target_padding"])
    total = sum(len(r) for r in batch["source_padding"] + batch["target_padding"])
    label_padding = [[int(i != PAD_ID) for i in r] for r in batch["label_ids"]]
    position, pad = t("common.position"), t("tokens.pad")
    timed(response, model_ms)
    return {
        "text": trace.text,
        "translation": trace.translation,
        "english": [{"token": tok, "id": i}
                    for tok, i in zip(trace.source_tokens, trace.source_ids, strict=True)],
        "chinese": [{"token": tok, "id": i}
                    for tok, i in zip(trace.target_tokens, trace.target_ids, strict=True)],
        "specials": [{"token": translator.chinese.id_to_token(i), "id": i, "key": key}
                     for key, i in batch["special"].items()]
        + [{"token": "<unk>", "id": UNK_ID, "key": "unk"}],
        "batch": batch,
        "rows": rows,
        "padding_share": {"pad": padded, "total": total},
        "figures": {
            "source": batch_heatmap(batch["source_tokens"], batch["source_ids"],
                                    batch["source_padding"], rows, t("tokens.source_batch"), pad,
                                    position),
            "decoder": batch_heatmap(batch["decoder_tokens"], batch["decoder_ids"],
                                     batch["target_padding"], rows, t("tokens.decoder_batch"), pad,
                                     position),
            "labels": batch_heatmap(batch["label_tokens"], batch["label_ids"], label_padding, rows,
                                    t("tokens.label_batch"), pad, position),
            "masks": masks,
        },
    }


def padded_batch(translator: Translator, sources: list[str], targets: list[str]) -> dict:
    """Tokenize (source, target) pairs, pad them into one mini-batch and build every mask.

    Masks are 1 where attention is allowed and 0 where it is blocked, as the model builds them
    (``padding_mask``, ``causal_mask``, ``decoder_self_mask`` in model/transformer.py; the tests
    check the two agree): the encoder's self-attention and the cross-attention block padded source
    keys, the decoder's self-attention blocks future positions and padded target keys.
    """
    src_rows = [translator.source_ids(text) for text in sources]
    tgt_rows = [translator.chinese.encode(text) for text in targets]
    src = _pad(src_rows)  # (B, S)
    tgt_in = _pad([[BOS_ID, *row] for row in tgt_rows])  # (B, T)
    labels = _pad([[*row, EOS_ID] for row in tgt_rows])  # (B, T): tgt_in shifted left by one
    source_keys = [[int(i != PAD_ID) for i in row] for row in src]  # (B, S)
    target_keys = [[int(i != PAD_ID) for i in row] for row in tgt_in]  # (B, T)
    s_len, t_len = len(src[0]), len(tgt_in[0])
    causal = [[int(key <= query) for key in range(t_len)] for query in range(t_len)]  # (T, T)
    return {
        "sources": sources,
        "targets": targets,
        "source_ids": src,
        "source_tokens": [translator.source_tokens(row) for row in src],
        "source_lengths": [len(row) for row in src_rows],
        "decoder_ids": tgt_in,
        "decoder_tokens": [translator.target_tokens(row) for row in tgt_in],
        "label_ids": labels,
        "label_tokens": [translator.target_tokens(row) for row in labels],
        "target_lengths": [len(row) + 1 for row in tgt_rows],
        "source_padding": source_keys,
        "target_padding": target_keys,
        "causal": causal,
        "encoder_mask": [[list(keys) for _ in range(s_len)] for keys in source_keys],  # (B, S, S)
        "decoder_mask": [[[c & k for c, k in zip(row, keys, strict=True)] for row in causal]
                         for keys in target_keys],  # (B, T, T)
        "cross_mask": [[list(keys) for _ in range(t_len)] for keys in source_keys],  # (B, T, S)
        "special": {"pad": PAD_ID, "bos": BOS_ID, "eos": EOS_ID},
    }


def _pad(rows: list[list[int]]) -> list[list[int]]:
    width = max(len(row) for row in rows)
    return [row + [PAD_ID] * (width - len(row)) for row in rows]


# -- figures --------------------------------------------------------------------------------------


def _cell_heatmap(z: list[list[int]], x: list, y: list[str], text: list[list[str]],
                  colorscale: list, gap: int) -> dict:
    """A 0/1 grid whose cells carry text: the shape of both the batch and the mask figures."""
    return {
        "type": "heatmap", "z": z, "x": x, "y": y, "text": text, "colorscale": colorscale,
        "zmin": 0, "zmax": 1, "showscale": False, "xgap": gap, "ygap": gap,
        "hovertemplate": "%{text}<extra></extra>",
    }


def batch_heatmap(
    tokens: list[list[str]], ids: list[list[int]], padding: list[list[int]], row_names: list[str],
    heading: str = "", pad_label: str = "padding", position: str = "position",
) -> dict:
    """A padded mini-batch: one row per sentence, each cell a token and its id, padding greyed."""
    text = [[f"{tok}<br>{i}" for tok, i in zip(trow, irow, strict=True)]
            for trow, irow in zip(tokens, ids, strict=True)]
    width = len(tokens[0])
    heatmap = _cell_heatmap(padding, list(range(width)), unique_labels(row_names), text,
                            BATCH_SCALE, 2)
    heatmap.update(texttemplate="%{text}", textfont={"size": PLOT_FONT_PX})
    layout = base_layout(
        heading, 90 + 52 * len(tokens),
        xaxis=plain_axis(position, dtick=1, range=[-0.5, width - 0.5]),
        yaxis=category_axis(reverse=True),
        # the key above the cells' left end: in view on a phone, where the chart scrolls sideways
        annotations=[{"text": f"■ {pad_label}", "showarrow": False, "x": 0, "y": 1,
                      "xref": "paper", "yref": "paper", "xanchor": "left", "yanchor": "bottom",
                      "font": {"color": "#777"}}],
    )
    # each cell prints a piece and its id: at least BATCH_CELL_PX a column (and the row names'
    # margin), which the page gives by scrolling the chart sideways on a narrower screen
    layout["meta"] = {"min_width": BATCH_MARGIN_PX + BATCH_CELL_PX * width}
    return {"data": [heatmap], "layout": layout}


def mask_heatmap(
    mask: list[list[int]], query_tokens: list[str], key_tokens: list[str], heading: str,
    allowed: str = "may attend", blocked: str = "blocked", labels: tuple[str, str] = ("query", "key"),
) -> dict:
    """A 0/1 attention mask: rows are queries, columns keys; blue may attend, dark is blocked."""
    text = [[f"{q} → {k}: {allowed if m else blocked}" for k, m in zip(key_tokens, row, strict=True)]
            for q, row in zip(query_tokens, mask, strict=True)]
    heatmap = _cell_heatmap(mask, unique_labels(key_tokens), unique_labels(query_tokens), text,
                            MASK_SCALE, 1)
    layout = base_layout(
        heading, max(260, min(520, 110 + 22 * len(query_tokens))),
        xaxis=category_axis(labels[1], tickangle=-60),
        yaxis=category_axis(labels[0], reverse=True),
    )
    return {"data": [heatmap], "layout": layout}
