"""The CLI as a user meets it: JSON fields, one-line errors with non-zero exits, multi-value flags."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mindcap_tok.cli._options import budgets_option, multi_option
from mindcap_tok.cli._parsing import Command, Group
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError


def run(args, env=None):
    return CliRunner().invoke(cli, args, env=env, catch_exceptions=False)


def _echo_command():
    """A throwaway command with the shared multi-value and budget options: it prints what click parsed."""

    @click.command(cls=Command)
    @multi_option("--lang", "langs")
    @budgets_option(help="")
    @click.option("--seed", type=int)
    @click.argument("rest", nargs=-1)
    def cmd(langs, budgets, seed, rest):
        click.echo(json.dumps([list(langs), budgets, seed, list(rest)]))

    return cmd


@pytest.mark.parametrize(
    "args",
    [
        ["--lang", "de", "th", "sw", "--budgets", "64", "128", "--seed", "1"],
        ["--lang", "de,th", "--lang", "sw", "--budgets", "64,128", "--seed", "1"],
        ["--lang=de,th", "sw", "--seed", "1", "--budgets=64", "--budgets", "128"],
        ["--seed", "1", "--lang", "de", "--lang", "th,sw", "--budgets", "128"],
    ],
)
def test_multi_value_options_accept_every_spelling(args):
    res = CliRunner().invoke(_echo_command(), args)
    assert res.exit_code == 0, res.output
    langs, budgets, seed, rest = json.loads(res.output)
    assert (langs, seed, rest) == (["de", "th", "sw"], 1, [])
    assert budgets == ([64, 128] if "64" in " ".join(args) else [128])


def test_multi_value_options_stop_at_the_next_option_and_at_double_dash():
    res = CliRunner().invoke(_echo_command(), ["--lang", "de", "--", "th", "-x"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == [["de"], None, None, ["th", "-x"]]


def test_list_values_stop_at_a_negative_number_and_take_a_lone_dash():
    # -5 after a value is the next option (click's "No such option"), the first value is taken as given, as ever
    res = CliRunner().invoke(_echo_command(), ["--budgets", "64", "-5"])
    assert res.exit_code == 2 and "No such option '-5'" in res.output
    res = CliRunner().invoke(_echo_command(), ["--budgets", "-5"])
    assert isinstance(res.exception, MindcapError) and "'-5' is not a valid budget" in str(res.exception)
    res = CliRunner().invoke(_echo_command(), ["--lang", "de", "-", "--seed=3", "x"])
    assert json.loads(res.output) == [["de", "-"], None, 3, ["x"]]


def test_list_options_are_spread_only_where_they_are_options():
    # another option's value is not an option (--texts --model); a group spreads only its own options, up to its
    # subcommand (whose single-value --lang keeps its one value), and the subcommand spreads its own
    @click.group(cls=Group)
    @multi_option("--lang", "langs")
    @click.option("--quiet", is_flag=True)
    def group(langs, quiet):
        click.echo(json.dumps([list(langs), quiet]))

    @group.command()
    @click.option("--texts")
    @click.option("--lang")
    @multi_option("--model", "models")
    @click.argument("rest", nargs=-1)
    def sub(texts, lang, models, rest):
        click.echo(json.dumps([texts, lang, list(models), list(rest)]))

    args = [
        "--lang",
        "de,th",
        "sw",
        "--quiet",
        "sub",
        "--texts",
        "--model",
        "a",
        "--lang",
        "b,c",
        "--model",
        "x",
        "y,z",
    ]
    res = CliRunner().invoke(group, args)
    assert res.exit_code == 0, res.output
    assert [json.loads(line) for line in res.output.splitlines()] == [
        [["de", "th", "sw"], True],
        ["--model", "b,c", ["x", "y", "z"], ["a"]],
    ]


def test_every_command_spreads_its_list_options():
    # a command built as a plain click.Command would take only the first value of --lang de th sw
    ctx = click.Context(cli)

    def walk(command, path):
        assert isinstance(command, (Command, Group)), f"{path} is a plain {type(command).__name__}"
        for name in command.list_commands(ctx) if isinstance(command, click.Group) else ():
            walk(command.get_command(ctx, name), f"{path} {name}")

    walk(cli, "mindcap-tok")


#: click's parser and its objects' private attributes (ctx._protected_args, parser._long_opt, option.obj._flag...)
PRIVATE_CLICK = re.compile(
    r"click\.parser|OptionParser|_protected_args|_opt_prefixes|click(?:\.\w+)*\._\w"
    r"|\b(?:ctx|context|parser|state|handler|param|option|opt|obj|cmd|command)\._\w"
)


def test_only_public_click_api():
    # click's internals change between minor releases (8.2 moved protected_args): src/ uses its public API only
    src = Path(__file__).resolve().parents[1] / "src"
    users = [p for p in sorted(src.rglob("*.py")) if re.search(r"^(import|from) click", p.read_text("utf-8"), re.M)]
    found = [
        f"{path.relative_to(src)}:{n}: {line.strip()}"
        for path in users
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if PRIVATE_CLICK.search(line)
    ]
    assert len(users) > 10 and found == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["score", "--ledger", ".", "--budgets", "64,,128"], "--budgets got an empty value ('64,,128')"),
        (["sweep", "--ledger", ".", "--budgets", "64", "1.5"], "--budgets: '1.5' is not a valid budget"),
        (["price", "--ledger", ".", "--lang", "th", "--cap", "0"], "--cap: '0' is not a valid budget"),
    ],
)
def test_bad_budget_lists_are_one_line_errors(args, needle):
    one_line_error(run(args), needle)


def test_premium_json_fields():
    res = run(
        [
            "premium",
            "--model",
            "qwen3-8b",
            "llama3.1",
            "--lang",
            "th",
            "sw",
            "--n-boot",
            "200",
            "--budgets",
            "128,256",
            "--format",
            "json",
        ]
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [(r["model"], r["lang"]) for r in rows] == [
        ("qwen3-8b", "tha_Thai"),
        ("qwen3-8b", "swh_Latn"),
        ("llama-3.1-8b", "tha_Thai"),
        ("llama-3.1-8b", "swh_Latn"),
    ]
    needed = {
        "model",
        "lang",
        "ref",
        "split",
        "premium",
        "ci_low",
        "ci_high",
        "tokens",
        "ref_tokens",
        "n_pairs",
        "n_boot",
        "seed",
        "scaled_budgets",
    }
    assert needed <= set(rows[0])
    th = rows[0]
    assert th["scaled_budgets"] == {"128": th["tokens"] * 128 // th["ref_tokens"], "256": 652}


def test_premium_out_file_and_csv(tmp_path):
    out = tmp_path / "p.csv"
    res = run(["premium", "--lang", "de", "--n-boot", "50", "--budgets", "64", "--format", "csv", "--out", str(out)])
    assert res.exit_code == 0
    import pandas as pd

    frame = pd.read_csv(out)
    assert list(frame["lang"]) == ["deu_Latn"] and "scaled_64" in frame.columns


def one_line_error(res, needle):
    """A user error: non-zero exit, one stderr line naming the problem, no traceback."""
    assert res.exit_code != 0
    assert needle in res.stderr
    assert "Traceback" not in res.stderr
    assert len([ln for ln in res.stderr.splitlines() if ln.strip() and "Usage" not in ln and "Try" not in ln]) == 1


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["premium", "--model", "gpt-17"], "unknown model 'gpt-17'"),
        (["premium", "--lang", "xx"], "unknown language 'xx'"),
        (["--data-dir", "/nonexistent/data", "premium"], "FLORES-200 folder not found"),
        (["premium", "--budgets", "64,abc"], "budgets must be comma-separated integers"),
    ],
)
def test_bad_input_is_one_line_nonzero(args, needle):
    one_line_error(run(args), needle)


def test_console_entry_point_reports_one_line():
    # the real entry point in a fresh interpreter (the in-process tests share pytest's)
    proc = subprocess.run(
        [sys.executable, "-m", "mindcap_tok", "premium", "--model", "gpt-17"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "unknown model 'gpt-17'" in proc.stderr


def test_unreadable_tokenizer_file_and_misaligned(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text("nope", encoding="utf-8")
    res = run(["premium", "--model", str(bad)])
    assert res.exit_code == 2
    one_line_error(res, "cannot read tokenizer file")

    data = tmp_path / "data" / "flores200" / "devtest"
    data.mkdir(parents=True)
    (data / "eng_Latn.devtest").write_text("a\nb\n", encoding="utf-8")
    (data / "tha_Thai.devtest").write_text("a\n", encoding="utf-8")
    res = run(["--data-dir", str(tmp_path / "data"), "premium", "--lang", "th"])
    assert res.exit_code == 2
    one_line_error(res, "not line-aligned")


def test_one_spelling_for_the_confidence_level_and_the_resamples(capsys):
    # --level everywhere; the former spelling --ci is refused as click refuses any unknown option
    res = run(["premium", "--lang", "th", "--n-boot", "200", "--level", "0.8", "--format", "json"])
    assert res.exit_code == 0 and json.loads(res.stdout)[0]["ci"] == 0.8
    res = run(["premium", "--lang", "th", "--n-boot", "200", "--ci", "0.8", "--format", "json"])
    assert res.exit_code == 2
    one_line_error(res, "No such option '--ci'")
    for args in (
        ["premium", "--lang", "th"],
        ["sweep", "--ledger", "."],
        ["price", "--ledger", ".", "--lang", "th", "--cap", "8"],
    ):
        res = run([*args, "--n-boot", "1"])
        assert res.exit_code == 2 and "--n-boot" in res.output and "x>=2" in res.output
