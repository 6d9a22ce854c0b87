"""The schema's patterns are read on the text as sent, the server's checks on the NFC-normalised
text (app/schemas.py): NFC never turns a text that has a Latin letter (or, for a reference, a
Chinese character) into one that has none, so the two agree (issue 59, item 1)."""

from __future__ import annotations

import sys
import unicodedata

from app.pages.training import CHINESE, CHINESE_AFTER_NFC
from app.schemas import LATIN_LETTER


def test_nfc_keeps_a_latin_letter():
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if LATIN_LETTER.match(char):
            assert LATIN_LETTER.search(unicodedata.normalize("NFC", char)), hex(code)


def test_a_letter_with_combining_marks_composes_to_a_latin_letter():
    marks = [chr(code) for code in range(sys.maxunicode + 1) if unicodedata.combining(chr(code))]
    for letter in "AaEeIiOoUuNnCcZz":
        for mark in marks:
            for text in (letter + mark, letter + mark + "\u0301"):
                assert LATIN_LETTER.search(unicodedata.normalize("NFC", text)), ascii(text)


def test_nfc_keeps_a_chinese_character():
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if CHINESE.match(char):
            assert CHINESE_AFTER_NFC.search(unicodedata.normalize("NFC", char)), hex(code)
