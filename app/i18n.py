"""Chinese and English strings for every page.

Strings live in dictionaries of ``key → {"zh": ..., "en": ...}``. A page module adds its own with
``register({...})``; templates call ``t("key")`` and scripts read the same strings from a JSON block.
The language comes from the ``lang`` cookie, else the browser's Accept-Language, else English.
"""

from __future__ import annotations

LANGUAGES = ("zh", "en")
DEFAULT_LANGUAGE = "en"
COOKIE = "lang"

STRINGS: dict[str, dict[str, str]] = {}


def register(strings: dict[str, dict[str, str]]) -> None:
    """Add a page's strings; every key needs both languages and must not be taken already."""
    for key, texts in strings.items():
        missing = [lang for lang in LANGUAGES if lang not in texts]
        if missing:
            raise ValueError(f"i18n key {key!r} lacks {', '.join(missing)}")
        if key in STRINGS and STRINGS[key] != texts:
            raise ValueError(f"i18n key {key!r} is already registered with other text")
        STRINGS[key] = texts


def choose_language(cookie: str | None, accept_language: str | None) -> str:
    """The cookie wins; else the highest-weighted supported language in Accept-Language."""
    if cookie in LANGUAGES:
        return cookie
    best, best_q = DEFAULT_LANGUAGE, 0.0
    for part in (accept_language or "").split(",")[:20]:
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        primary = tag.strip().lower().split("-")[0]
        if primary in LANGUAGES and q > best_q:
            best, best_q = primary, q
    return best


class Translate:
    """``t("key")`` → the string in this language; an unknown key shows itself (easy to spot)."""

    def __init__(self, lang: str):
        self.lang = lang

    def __call__(self, key: str, **values: object) -> str:
        text = STRINGS.get(key, {}).get(self.lang, key)
        return text.format(**values) if values else text

    def table(self) -> dict[str, str]:
        return {key: texts[self.lang] for key, texts in STRINGS.items()}


register({
    # layout
    "site.title": {"zh": "Transformer 内部", "en": "Inside the Transformer"},
    "site.tagline": {
        "zh": "看一个真实的英译中 Transformer 如何一步步翻译",
        "en": "Watch a real English→Chinese Transformer translate, one number at a time",
    },
    "nav.label": {"zh": "页面", "en": "Pages"},
    "nav.pipeline": {"zh": "总览", "en": "Pipeline"},
    "nav.tokens": {"zh": "分词", "en": "Tokens"},
    "nav.embeddings": {"zh": "嵌入与位置", "en": "Embeddings"},
    "nav.attention": {"zh": "注意力", "en": "Attention"},
    "nav.decode": {"zh": "逐步解码", "en": "Decoding"},
    "nav.training": {"zh": "训练", "en": "Training"},
    "nav.kv-cache": {"zh": "KV 缓存", "en": "KV cache"},
    "nav.scale": {"zh": "规模", "en": "Scale"},
    "nav.tour": {"zh": "导览", "en": "Tour"},
    "nav.docs": {"zh": "API", "en": "API"},
    "lang.switch": {"zh": "English", "en": "中文"},
    "lang.switch_label": {"zh": "切换到英文", "en": "Switch to Chinese"},
    "skip": {"zh": "跳到正文", "en": "Skip to content"},
    "loading": {"zh": "模型计算中…", "en": "The model is working…"},
    "error.title": {"zh": "出错了", "en": "Something went wrong"},
    "error.network": {"zh": "无法连接服务器。", "en": "Could not reach the server."},
    "footer": {
        "zh": "所有数字都来自本机上运行的模型；页面不连接任何外部网站。",
        "en": "Every number comes from the model running on this machine; no page contacts "
              "any other site.",
    },
    # the sentence form shared by the pages
    "form.label": {"zh": "英文句子", "en": "English sentence"},
    "form.placeholder": {"zh": "输入一句英文…", "en": "Type an English sentence…"},
    "form.submit": {"zh": "翻译", "en": "Translate"},
    "form.examples": {"zh": "试试这些句子：", "en": "Try one:"},
    "form.hint": {
        "zh": "最多 200 个字符；模型只懂英文。",
        "en": "Up to 200 characters; the model reads English only.",
    },
    # words used on several pages
    "word.layer": {"zh": "第 {n} 层", "en": "Layer {n}"},
    "word.head": {"zh": "头 {n}", "en": "Head {n}"},
    "word.step": {"zh": "第 {n} 步", "en": "Step {n}"},
    "word.translation": {"zh": "译文", "en": "Translation"},
    "word.source_tokens": {"zh": "英文词元", "en": "English tokens"},
    "word.target_tokens": {"zh": "中文词元", "en": "Chinese tokens"},
    "word.probability": {"zh": "概率", "en": "probability"},
    "word.weight": {"zh": "权重", "en": "weight"},
    "word.query": {"zh": "查询（Query）", "en": "query"},
    "word.key": {"zh": "键（Key）", "en": "key"},
    "word.model_ms": {"zh": "模型用时 {ms} 毫秒", "en": "model time {ms} ms"},
    "word.unfinished": {
        "zh": "（达到最大长度，未生成 <eos>）",
        "en": "(stopped at the length limit before <eos>)",
    },
})
