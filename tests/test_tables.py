"""The one table renderer (mindcap_tok._tables): LaTeX escaped, one number format, one FORMATS tuple."""

from __future__ import annotations

import math

import pandas as pd

from mindcap_tok._tables import FORMATS, markdown_table
from mindcap_tok.cli._output import render


def test_latex_escapes_its_special_characters():
    rows = [
        {"lang_code": "tha_Thai", "share": "50%", "r": 1.5},
        {"lang_code": "a&b#$c{d}~e^f\\g", "share": None, "r": math.nan},
    ]
    assert render(rows, "latex") == (
        "\\begin{tabular}{llr}\n\\toprule\n"
        "lang\\_code & share & r \\\\\n\\midrule\n"
        "tha\\_Thai & 50\\% & 1.5000 \\\\\n"
        "a\\&b\\#\\$c\\{d\\}\\textasciitilde e\\textasciicircum f\\textbackslash g & --- & --- \\\\\n"
        "\\bottomrule\n\\end{tabular}\n"
    )


def test_markdown_cells_stay_one_cell():
    # a "|" or a newline inside a value would split or end a pipe table row
    md = render([{"note": "a|b\nc", "n": 2}], "md")
    assert md.splitlines()[2] == "| a\\|b c |   2 |"


def test_one_number_format_for_every_caller():
    frame = pd.DataFrame({"x": [0.031, 50.0, math.inf]})
    assert [r.split("|")[1].strip() for r in markdown_table(frame, ".4g").splitlines()[2:]] == ["0.031", "50", "—"]
    assert [r.split("|")[1].strip() for r in markdown_table(frame).splitlines()[2:]] == ["0.0310", "50.0000", "—"]


def test_one_formats_tuple():
    from mindcap_tok.cli._options import format_option

    def choices(**kw):
        return format_option(**kw)(lambda fmt: None).__click_params__[0].type.choices

    assert tuple(choices(latex=True)) == FORMATS and tuple(choices()) == FORMATS[:-1] == ("table", "json", "csv", "md")
