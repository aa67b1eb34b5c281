"""Messages that say what is true and what to do: global options after the subcommand, a language or model the
ledger does not hold, a config file nested too deeply, an absurd split count, an audit that scored nothing, and
an output that cannot be written (a file too large for the process's limit, a full device)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cli_tree import command_at, leaf_commands
from conftest import REPO
from ledger_factory import make_cell, make_record
from mindcap_tok.cli.main import GLOBAL_VALUE_OPTIONS, cli, globals_first
from mindcap_tok.store.ledger import Ledger


def run(args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)


def one_line_error(res, needle: str) -> str:
    """The single stderr line of a refused command (exit 2), which must hold ``needle``."""
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.strip().splitlines()
    assert needle in line and res.stdout == "", line
    return line


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, qwen):
    """Thai native and translate-act traces of qwen3-8b (translations with no blank line after them), and a
    German native cell of another model."""
    root = tmp_path_factory.mktemp("msg") / "L"
    recs = make_cell(qwen, 3, 2) + make_cell(qwen, 3, 2, arm="translate-act")
    recs += [
        make_record(qwen, f"Schritt {i}\n#### {i + 10}\n", model="m2", lang="deu_Latn", item=i, gold=i + 10)
        for i in range(3)
    ]
    Ledger(root).append(recs, qwen)
    return root


# -- global options after the subcommand ------------------------------------------------------------------------


def test_global_options_are_read_after_the_subcommand_too(tmp_path):
    res = run(["config", "--format", "json", "--data-dir", tmp_path / "d", f"--tokenizers-dir={tmp_path / 't'}"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info["data_dir"] == {"value": str(tmp_path / "d"), "source": "flag"}
    assert info["tokenizers_dir"] == {"value": str(tmp_path / "t"), "source": "flag"}


def test_a_global_option_without_its_value_is_one_line_not_the_subcommand_taken_as_value():
    res = run(["config", "--data-dir"])
    assert res.exit_code == 2 and "Option '--data-dir' requires an argument." in res.stderr
    assert "Did you mean" not in res.stderr and res.stdout == ""
    assert globals_first(["score", "--", "--data-dir", "d"]) == ["score", "--", "--data-dir", "d"]


@pytest.mark.parametrize("path", leaf_commands(), ids=" ".join)
def test_no_command_has_an_option_named_like_a_global_one(path):
    # the root group takes these wherever they stand; a command of its own option of the name would never see it
    names = {n for p in command_at(path).params for n in (*p.opts, *p.secondary_opts)}
    assert not names & {*GLOBAL_VALUE_OPTIONS, "--debug"}


# -- a selection the ledger does not hold -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["score"],
        ["sweep", "--premiums", "th=2", "--n-boot", "50"],
        ["consistency", "--premiums", "th=2"],
        ["report", "--premiums", "th=2", "--n-boot", "50", "--out-dir", "{out}"],
    ],
    ids=lambda c: c[0],
)
def test_a_language_the_ledger_lacks_is_named_with_the_languages_it_holds(ledger, tmp_path, command):
    args = [a.format(out=tmp_path / "rep") for a in command]
    line = one_line_error(run([*args, "--ledger", ledger, "--lang", "fr"]), "")
    assert line == f"error: no records in {ledger} match --lang fr (the ledger holds deu_Latn, tha_Thai)"
    assert not (tmp_path / "rep").exists()


def test_confirm_names_what_each_ledger_holds(ledger):
    res = run(
        ["confirm", "--replay", ledger, "--independent", ledger, "--lang", "sw", "--model", "qwen3", "--n-boot", "50"]
    )
    line = one_line_error(res, "")
    assert line == (f"error: no records in {ledger} match --lang sw (the ledger holds deu_Latn, tha_Thai)")


def test_cost_grid_names_the_models_the_ledger_holds(ledger, tmp_path):
    prices = tmp_path / "prices.csv"
    prices.write_text("model,input,output\nqwen3-8b,0.2,0.8\n", "utf-8")
    res = run(["cost-grid", "--ledger", ledger, "--prices", prices, "--model", "llama3.1", "--budgets", "256"])
    assert (
        one_line_error(res, "")
        == f"error: no records in {ledger} match --model llama3.1 (the ledger holds m2, qwen3-8b)"
    )


def test_filters_that_each_match_but_not_together_name_the_cells(ledger):
    line = one_line_error(run(["score", "--ledger", ledger, "--model", "m2", "--lang", "th"]), "")
    cells = "m2/native/deu_Latn, qwen3-8b/native/tha_Thai, qwen3-8b/translate-act/tha_Thai"
    assert line == f"error: no records in {ledger} match --model m2 with --lang th together (its cells: {cells})"
    line = one_line_error(run(["score", "--ledger", ledger, "--arm", "pivot", "--model", "llama3.1"]), "")
    assert line == (
        f"error: no records in {ledger} match --model llama3.1 (the ledger holds m2, qwen3-8b); "
        "--arm pivot (the ledger holds native, translate-act)"
    )


# -- config, splits, audits -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,needle",
    [
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "values nested too deeply for the TOML reader"),
        ("x = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n", "values nested too deeply for the TOML reader"),
        ("paths = 3\n", "[paths] must be a table"),
        ("[paths]\ndata_dir = 3\n", "data_dir under [paths] must be a string"),
    ],
)
def test_a_config_file_that_cannot_be_used_is_one_line_naming_it(tmp_path, text, needle):
    cfg = tmp_path / "mindcap.toml"
    cfg.write_text(text, "utf-8")
    res = run(["config"], env={"MINDCAP_CONFIG": str(cfg)})
    line = one_line_error(res, needle)
    assert line.startswith(
        f"error: cannot read config file {cfg}: " if "nested" in needle else f"error: config file {cfg}: "
    )


def test_an_absurd_split_count_is_refused_with_the_bound(ledger):
    res = run(["consistency", "--ledger", ledger, "--premiums", "th=2", "--splits", "1000000000"])
    assert one_line_error(res, "") == "error: splits must be a whole number from 1 to 1,000, got 1000000000"


def test_a_translation_audit_that_scored_nothing_says_so_and_is_not_ok(ledger, tmp_path):
    res = run(["audit", "--ledger", ledger, "--out-dir", tmp_path / "a", "--only", "comet", "--n-boot", "50"])
    assert res.exit_code == 0, res.output
    reason = (
        "nothing scored: of 6 translation-arm records, 6 have no translation segment (no match of the delimiter "
        r"regex \n[ \t]*\n; see --delimiter) and 0 no reference text"
    )
    assert f"comet: skipped: {reason} (" in res.stderr and res.stdout == ""
    (audit,) = json.loads((tmp_path / "a" / "audit.json").read_text("utf-8"))["audits"]
    assert (audit["status"], audit["reason"]) == ("skipped", reason)
    # the control: with a delimiter the traces hold (their answer line), each has a segment and is scored
    res = run(["audit", "--ledger", ledger, "--out-dir", tmp_path / "b", "--only", "comet", "--delimiter", "####"])
    assert res.exit_code == 0 and "comet: ok (" in res.stderr, res.output
    (audit,) = json.loads((tmp_path / "b" / "audit.json").read_text("utf-8"))["audits"]
    assert audit["summary"]["segments_scored"] == 6


# -- outputs that cannot be written -----------------------------------------------------------------------------


def _cli(args, limit: int | None = None, **kw) -> subprocess.CompletedProcess:
    """The CLI in a child process; ``limit``: its largest file size in bytes (a write past it fails with EFBIG,
    the signal that would otherwise end the process ignored)."""

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [sys.executable, "-m", "mindcap_tok", *map(str, args)],
        cwd=REPO,
        env=env,
        text=True,
        preexec_fn=small_files if limit else None,
        timeout=120,
        **kw,
    )


def test_an_out_file_that_cannot_be_written_is_one_line_and_the_old_file_stays(ledger, tmp_path):
    out = tmp_path / "info.json"
    out.write_text("old", "utf-8")
    proc = _cli(["ledger", "info", ledger, "--format", "json", "--out", out], limit=64, capture_output=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"error: cannot write {out}: File too large; {out} was not written or changed\n"
    assert out.read_text("utf-8") == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["info.json"]


def test_a_full_standard_output_is_one_line(tmp_path):
    with open("/dev/full", "w") as full:  # every write to it fails with ENOSPC
        proc = _cli(["languages"], stdout=full, stderr=subprocess.PIPE)
    assert proc.returncode == 2
    assert proc.stderr == "error: cannot write the output to standard output: No space left on device\n"


@pytest.mark.parametrize("command", [["config"], ["score"], ["ledger", "import"]])
def test_help_works_beside_a_config_file_that_cannot_be_read(tmp_path, command):
    cfg = tmp_path / "mindcap.toml"
    cfg.write_text("paths = 3\n", "utf-8")
    res = run([*command, "--help"], env={"MINDCAP_CONFIG": str(cfg)})
    assert res.exit_code == 0 and "Usage:" in res.stdout, res.output
    assert run(command, env={"MINDCAP_CONFIG": str(cfg)}).exit_code == 2  # the file is still refused without --help


@pytest.mark.parametrize(
    "command",
    [
        ["score", "--budgets", "64", "--format", "json"],
        ["sweep", "--premiums", "th=2", "--n-boot", "50", "--format", "json"],
    ],
    ids=lambda c: c[0],
)
def test_a_language_among_others_that_the_ledger_lacks_is_warned_of(ledger, command):
    res = run([*command, "--ledger", ledger, "--lang", "fr", "--lang", "th"])
    assert res.exit_code == 0, res.output
    assert (
        f"warning: --lang fr matches no record of {ledger} (it holds deu_Latn, tha_Thai); the results leave it out"
        in res.stderr.splitlines()
    )
    out = json.loads(res.stdout)
    assert {row["lang"] for row in (out["rows"] if command[0] == "sweep" else out)} == {"tha_Thai"}
    quiet = run([*command, "--ledger", ledger, "--lang", "th"])
    assert "warning: --lang" not in quiet.stderr
