"""Tables readable at a glance: a plain table fits the width it is given (the terminal's, or ``COLUMNS``) by
leaving out trailing value columns, never the key columns, and says which it left out; ``--wide`` and ``--out``
keep every column; integer columns print as integers; no colour codes in plain text."""

from __future__ import annotations

import json

import pandas as pd
from click.testing import CliRunner

from mindcap_tok._tables import markdown_table, render
from mindcap_tok.cli.main import cli

#: a sweep-shaped table of 17 columns, about 200 characters at full width (the issue's 144-218)
ROWS = [
    {"model": "qwen3-8b", "lang": lang, "design": design, "announced": announced, "budget": b}
    | {name: 10.0 + k + b / 100 for k, name in enumerate(("premium", "acc_native", "acc_native_scaled", "delta"))}
    | {name: 1.5 * k + b for k, name in enumerate(("ci_low", "ci_high", "band_low", "band_high", "acc_translate"))}
    | {"gap": -b / 100, "native_lead_prob": b / 1000, "n_items": 250}
    for lang, design, announced in (
        ("tha_Thai", "replay", None),
        ("tha_Thai", "announcement", 256),
        ("deu_Latn", "replay", None),
    )
    for b in (64, 128)
]


def _widths(text: str) -> list[int]:
    return [len(line) for line in text.splitlines()]


def test_a_plain_table_fits_its_width_and_keeps_the_key_columns():
    full = render(ROWS, "table")
    assert max(_widths(full)) > 180 and "not shown" not in full  # no width: every column
    narrow = render(ROWS, "table", title="Δ_L sweep", width=80, priority=("delta",))
    assert max(_widths(narrow)) <= 80
    header = next(line for line in narrow.splitlines() if line.startswith("┃"))
    for key in ("lang", "design", "announced", "budget", "delta"):  # keys, then the priority column
        assert f" {key} " in header, key
    assert "every row: model qwen3-8b, n_items 250)" in " ".join(narrow.split())  # one value: in the title
    assert "acc_native_scaled" not in header
    hidden = " ".join(narrow.split("not shown:")[1].split())
    assert hidden.startswith("acc_native, acc_native_scaled") and "(--wide shows all)" in hidden
    assert "\x1b" not in narrow and "…" not in narrow  # plain text, nothing cut mid-value
    # the announced budget of an announcement cell prints 256, a replay cell's missing one —
    assert "│       256 │" in narrow and "│         — │" in narrow


def test_a_column_with_one_value_moves_into_the_title_when_the_table_is_too_wide():
    one_lang = [dict(r, lang="tha_Thai") for r in ROWS]
    narrow = render(one_lang, "table", title="sweep", width=80)
    assert "every row: model qwen3-8b, lang tha_Thai, n_items 250)" in " ".join(narrow.split())
    assert max(_widths(narrow)) <= 80


def test_markdown_prints_whole_number_columns_as_integers():
    frame = pd.DataFrame({"design": ["replay", "announcement"], "announced": [None, 256.0], "delta": [1.5, 2.0]})
    text = markdown_table(frame, ".2f")
    assert "|         256 |" in text and "256.00" not in text and "2.00" in text


def _run_jsonl(tmp_path):
    records = [
        {"text": "9 + 9 = 18\n#### 18", "finish_reason": "stop", "gold": 18},
        {"text": "3 * 4 = 12\n#### 12", "finish_reason": "stop", "gold": 12},
        {"text": "Zuerst zählen wir alle Eier, dann", "finish_reason": "length", "gold": 7},
        {"text": "Wir rechnen Schritt für Schritt: 5", "finish_reason": "length", "gold": 5},
    ]
    path = tmp_path / "run.jsonl"
    lines = [
        {"model": "qwen3-8b", "arm": "native", "lang": "de", "item": i, "sample": 0, "seed": 0, "cap": 16}
        | {"prompt": f"Frage {i}", "generator": "vllm"}
        | r
        for i, r in enumerate(records)
    ]
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), "utf-8")
    return path


def test_a_cli_table_fits_columns_and_wide_or_out_keep_every_column(tmp_path):
    run = _run_jsonl(tmp_path)
    args = ["check", str(run), "--tokenizer", "qwen3-8b", "--premiums", "de=1.559"]
    narrow = CliRunner().invoke(cli, args, env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    assert max(_widths(narrow.stdout)) <= 80
    header = next(line for line in narrow.stdout.splitlines() if line.startswith("┃"))
    assert all(f" {key} " in header for key in ("model", "task", "arm", "lang", "cap"))
    assert "--wide shows all" in " ".join(narrow.stdout.split())
    wide = CliRunner().invoke(cli, [*args, "--wide"], env={"COLUMNS": "80"})
    assert max(_widths(wide.stdout)) > 120 and "rerun cap" in wide.stdout and "not shown" not in wide.stdout
    out = tmp_path / "check.txt"
    to_file = CliRunner().invoke(cli, [*args, "--out", str(out)], env={"COLUMNS": "80"})
    assert to_file.exit_code == 0 and "rerun cap" in out.read_text("utf-8")
