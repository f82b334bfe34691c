"""text_units: the whole-text pass for texts without tables equals the line-by-line reference."""

from __future__ import annotations

import random

import pytest
from fastrag.datasets import demo_documents
from fastrag.datasets.synthetic import mixed_documents
from naive.sentences import text_units as naive_text_units

from fastrag.text.sentences import text_units

TRICKY = [
    "",
    "\n",
    "One. Two.\nThree",
    "ends with a dot.\n\n\n  indented line.  \n",
    "3.5 days. e.g.[1] next",
    "年假怎么申请？请在系统中提交。\n第二行；第三句…",
    "windows\r\nline endings\r\n",
    "old mac\rline\rendings.",
    "form\x0cfeed and\x0bvertical tab\x85next line\u2028separator\u2029para",
    "Fault code: SV0432 | Fix: replace the fan | Cause: heat",
    "text | pipe but not a row. And more.",
    "Name: A | Age: 3 Name: B | Age: 4\nplain sentence. Another!",
    "  \t  ",
    "...",
    ". . .",
    "no terminator at the end",
]


@pytest.mark.parametrize("text", TRICKY)
def test_text_units_equal_the_line_by_line_reference(text):
    assert text_units(text) == naive_text_units(text)


def test_text_units_of_real_and_random_texts_equal_the_reference():
    texts = [d["text"] for d in demo_documents()]
    texts += [d["text"] for d in mixed_documents(30, seed=3, mean_chars=800)]
    rng = random.Random(5)
    pool = list("ab c. .\n\n  \t|:;!?。！？；…[1]x\r\x0b\x0c\x85\u2028中文")
    pool += ["Fix: ", " | ", "Code: ", "\r\n", ". ", ".\n"]
    texts += ["".join(rng.choice(pool) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    for text in texts:
        assert text_units(text) == naive_text_units(text), repr(text)
