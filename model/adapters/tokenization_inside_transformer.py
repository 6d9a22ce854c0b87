"""English in, Chinese out: one Hugging Face tokenizer over the exported folder's two vocabularies.

model/adapters/export_hf.py copies this file into the folder it writes;
``AutoTokenizer.from_pretrained(DIR, trust_remote_code=True)`` loads it (without the flag,
AutoTokenizer gives the plain English tokenizer). It behaves as transformers' ``MarianTokenizer``
does with separate vocabularies: text is English, ``text_target=`` is Chinese, and ids are read
back as Chinese, the model's outputs (``decode(..., use_source_tokenizer=True)`` reads English) —
so ``pipeline("translation")`` and inseq, which hold one tokenizer, decode the translation. It
imports nothing from this project: the folder works without it.
"""

from __future__ import annotations

import os

from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

TARGET_FILE = "target/tokenizer.json"


class _TwoVocabularies(PreTrainedTokenizerFast):
    """The English tokenizer (tokenizer.json) with the Chinese one (target/tokenizer.json)."""

    vocab_files_names = {"tokenizer_file": "tokenizer.json", "target_tokenizer_file": TARGET_FILE}
    _decode_use_source_tokenizer = False  # MarianTokenizer's switch, which inseq sets

    def __init__(self, *args, target_tokenizer_file: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if target_tokenizer_file is None or not os.path.isfile(target_tokenizer_file):
            raise ValueError(f"the Chinese tokenizer ({TARGET_FILE}) is missing from the folder")
        self._source = self._tokenizer
        self._target = Tokenizer.from_file(target_tokenizer_file)

    def _switch_to_target_mode(self) -> None:
        self._tokenizer = self._target

    def _switch_to_input_mode(self) -> None:
        self._tokenizer = self._source

    def _encode_plus(self, *args, **kwargs):
        if self._tokenizer is self._target:  # "<unk>" in a Chinese text is five characters
            kwargs["split_special_tokens"] = True
        return super()._encode_plus(*args, **kwargs)

    def _decode(self, token_ids, skip_special_tokens: bool = False,
                clean_up_tokenization_spaces: bool | None = None, **kwargs) -> str:
        reading = self._source if kwargs.pop("use_source_tokenizer", False) else self._target
        current, self._tokenizer = self._tokenizer, reading
        try:
            return super()._decode(token_ids, skip_special_tokens, clean_up_tokenization_spaces,
                                   **kwargs)
        finally:
            self._tokenizer = current

    def convert_ids_to_tokens(self, ids, skip_special_tokens: bool = False):
        """Ids read as Chinese tokens, as ``MarianTokenizer`` reads them with separate vocabularies
        (the English tokens of English ids: ``AutoTokenizer.from_pretrained(DIR)``)."""
        current, self._tokenizer = self._tokenizer, self._target
        try:
            return super().convert_ids_to_tokens(ids, skip_special_tokens)
        finally:
            self._tokenizer = current

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        """Chinese tokens joined as Chinese (English ones when ``_decode_use_source_tokenizer``)."""
        backend = self._source if self._decode_use_source_tokenizer else self._target
        return backend.decoder.decode(tokens)

    def save_pretrained(self, save_directory, *args, **kwargs):
        saved = super().save_pretrained(save_directory, *args, **kwargs)
        target = os.path.join(save_directory, TARGET_FILE)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        self._target.save(target)
        return (*saved, target)


class TranslationTokenizer(_TwoVocabularies):
    """English in, Chinese out. (The ``__init__`` lives in the base class on purpose:
    transformers 5 reads tokenizer.json as it is only for a class that defines no ``__init__``
    itself, and otherwise rebuilds the backend from its vocabulary, without the BPE merges.)"""
