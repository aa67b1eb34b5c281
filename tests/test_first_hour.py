"""Message and output defects a new user meets in the first hour, each checked through the CLI."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from ledger_factory import make_cell
from mindcap_tok.cli.main import cli
from mindcap_tok.store.ledger import Ledger


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, qwen):
    root = tmp_path_factory.mktemp("ledger") / "led"
    Ledger(root).append(make_cell(qwen, n_items=3, n_samples=2), qwen)  # 3 items x 2 samples, Thai native
    return root


def run(args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_sweep_out_ending_in_a_separator_is_refused(ledger, tmp_path):
    res = run(["sweep", "--ledger", ledger, "--premiums", "th=2", "--budgets", "8", "--out", f"{tmp_path}/res/"])
    assert res.exit_code == 2 and "ends with a path separator" in res.output
    assert not (tmp_path / "res").exists()


def test_score_save_names_its_files_without_a_double_slash(ledger, tmp_path):
    res = run(["score", "--ledger", ledger, "--budgets", "8", "--save", f"{tmp_path}/scoresave/"])
    assert res.exit_code == 0, res.output
    assert f"wrote {tmp_path}/scoresave/by_budget.parquet and by_record.parquet" in res.output
    assert "//" not in res.output.replace(str(tmp_path), "")


def test_debug_after_the_subcommand_shows_the_traceback(tmp_path):
    (tmp_path / "empty").mkdir()
    res = run(["score", "--ledger", tmp_path / "empty", "--debug"])
    assert res.exit_code == 2 and "no ledger at" in res.output and "Traceback" in res.output
    from mindcap_tok.cli.main import globals_first

    assert globals_first(["sweep", "--debug", "--", "--debug"]) == ["--debug", "sweep", "--", "--debug"]


def test_ledger_info_prints_counts_as_integers(ledger):
    res = run(["ledger", "info", ledger, "--format", "json"])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert row["samples_per_item"] == 2 and isinstance(row["samples_per_item"], int)
    assert row["retokenized"] == 0 and isinstance(row["retokenized"], int)
    table = run(["ledger", "info", ledger]).stdout
    assert " 2.0 " not in table and " 0.0 " not in table


def test_config_names_the_user_config_folder_when_no_file_exists(tmp_path, monkeypatch):
    for var in ("MINDCAP_CONFIG", "MINDCAP_DATA_DIR", "MINDCAP_TOKENIZERS_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # platformdirs' Linux config folder
    monkeypatch.chdir(tmp_path)
    res = run(["config", "--format", "json"])
    assert res.exit_code == 0, res.output
    entry = json.loads(res.stdout)["config_file"]
    if entry["value"] is None:  # a mindcap.toml above tmp_path would be found legitimately
        assert str(tmp_path / "xdg" / "mindcap-tok" / "mindcap.toml") in entry["source"]


def test_missing_vllm_on_a_machine_without_a_gpu_points_at_the_cpu_routes(tmp_path):
    import importlib.util

    from mindcap_tok.errors import MissingExtraError
    from mindcap_tok.generation.backends import has_nvidia_gpu, load_backend

    if importlib.util.find_spec("vllm") is not None or has_nvidia_gpu():
        pytest.skip("needs a machine without vllm and without an NVIDIA GPU")
    with pytest.raises(MissingExtraError, match=r"mindcap-tok\[gen\].*no NVIDIA GPU.*--backend transformers"):
        load_backend("vllm", str(tmp_path), tokenizer_name="x")


def test_a_round_trip_spec_given_to_generate_names_the_roundtrip_command(tmp_path):
    job = tmp_path / "rt.toml"
    job.write_text('model = "org/m"\ntexts = "flores:devtest"\nsequences = ["en>de>en"]\n[judge]\nretries = 0\n')
    res = run(["generate", job, "--out-dir", tmp_path / "led", "--dry-run"])
    assert res.exit_code == 2
    assert "looks like a round-trip spec (it has judge, sequences, texts): use mindcap-tok roundtrip" in res.output


def test_a_generate_whose_backend_fails_to_start_leaves_no_ledger_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    job = tmp_path / "job.toml"
    job.write_text(
        'name = "t"\nmodel = "org/m"\nmodel_name = "m"\narms = ["native"]\nlangs = ["th"]\nitems = [0]\nk = 1\n'
        'design = "replay"\ncaps = [8]\n'
    )
    res = run(["generate", job, "--out-dir", tmp_path / "led", "--backend", "transformers"])
    assert res.exit_code == 2 and "error:" in res.output
    assert not (tmp_path / "led").exists()


def test_roundtrip_report_on_a_wrong_folder_names_the_out_dir_option(tmp_path):
    (tmp_path / "notarun").mkdir()
    res = run(["roundtrip", "report", tmp_path / "notarun", "--out-dir", tmp_path / "rep", "--no-lid"])
    assert res.exit_code == 2 and "is not a round-trip run folder" in res.output
    assert "give the folder `mindcap-tok roundtrip --out-dir` wrote" in res.output


def test_a_missing_relative_model_folder_says_what_it_is_relative_to(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    job = jobs / "job.toml"
    job.write_text(
        'name = "t"\nmodel = "../out/tiny"\nmodel_name = "m"\narms = ["native"]\nlangs = ["th"]\nitems = [0]\nk = 1\n'
        'design = "replay"\ncaps = [8]\n'
    )
    res = run(["generate", job, "--out-dir", tmp_path / "led", "--dry-run"])
    assert res.exit_code == 2
    assert f"read from the spec file's folder ({jobs}, here {tmp_path / 'out' / 'tiny'})" in res.output


def test_offline_tokenizer_messages_say_what_is_true_and_what_to_do(monkeypatch, tmp_path, config):
    from mindcap_tok.errors import MindcapError
    from mindcap_tok.tokenization.load import load_tokenizer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    local = config.tokenizers_dir.value / "qwen3" / "tokenizer.json"
    # a registry model's hub id in a configured checkout: its registry name reads the local copy, named
    with pytest.raises(MindcapError) as exc:
        load_tokenizer("Qwen/Qwen3-8B", config.tokenizers_dir.value)
    assert f"use its registry name 'qwen3-8b', which reads the local copy {local}" in str(exc.value)
    assert "point mindcap-tok at local tokenizers" not in str(exc.value)
    # the registry name with no local copy: where the copy was looked for, never "use its registry name"
    with pytest.raises(MindcapError) as exc:
        load_tokenizer("qwen3-8b", tmp_path)
    message = str(exc.value)
    assert f"the local tokenizers folder {tmp_path} has no qwen3/ folder" in message and "HF_HUB_OFFLINE" in message
    assert "use its registry name" not in message
    # another organisation's id: a local folder or file instead, no registry name
    with pytest.raises(MindcapError) as exc:
        load_tokenizer("org/unknown-model", tmp_path)
    assert "give the tokenizer's local folder or tokenizer file" in str(exc.value)
    assert "registry name" not in str(exc.value)


def test_every_output_path_the_readme_and_docs_write_is_git_ignored():
    import re
    import shutil
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    if shutil.which("git") is None or not (repo / ".git").exists():
        pytest.skip("needs git and a checkout")
    pages = [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    readme = "\n".join(p.read_text("utf-8") for p in pages)
    paths = {m for m in re.findall(r"--(?:out-dir|out|save|plot|tiny-model) ([a-z0-9_./-]+)", readme)}
    assert {"demo/", "th-ext/", "sweep.csv", "out/tiny-qwen3"} <= paths
    found = subprocess.run(["git", "-C", repo, "check-ignore", "--no-index", *sorted(paths)], capture_output=True)
    ignored = set(found.stdout.decode().split())
    assert paths == ignored, sorted(paths - ignored)


@pytest.mark.slow
def test_extend_keeps_counts_integers_in_the_mean_row(tmp_path):
    corpus = tmp_path / "th.txt"
    corpus.write_text("".join(f"ขั้นที่ {i}: คิดเลข ไข่ {i} ฟอง แล้วบวก\n" for i in range(40)), "utf-8")
    args = ["extend", "--model", "qwen3-8b", "--lang", "th", "--corpus", corpus, "--size", "2", "--n-boot", "40"]
    res = run([*args, "--out-dir", tmp_path / "ext", "--format", "json"])
    assert res.exit_code == 0, res.output
    mean = json.loads(res.stdout)[-1]
    assert mean["fold"] == "mean" and mean["merges"] == 2 and isinstance(mean["merges"], int)
    assert isinstance(mean["new_tokens"], int)


def test_an_announced_budget_prints_as_an_integer_in_every_table_format(tmp_path, qwen):
    root = tmp_path / "led"
    Ledger(root).append(make_cell(qwen, n_items=2, n_samples=1), qwen)
    Ledger(root).append(make_cell(qwen, n_items=2, n_samples=1, announced=256, announce_style="natural"), qwen)
    for fmt in ("table", "md", "csv"):
        res = run(["score", "--ledger", root, "--budgets", "8", "--format", fmt])
        assert res.exit_code == 0, res.output
        assert "256.0" not in res.stdout, fmt
        assert re.search(r"(^|[ ,|&])256([ ,|&]|$)", res.stdout, re.M), fmt  # the budget, as an integer cell
    rows = json.loads(run(["score", "--ledger", root, "--budgets", "8", "--format", "json"]).stdout)
    assert sorted(r["announced"] for r in rows if r["announced"] is not None) == [256]
    from mindcap_tok._tables import render

    latex = render([{"announced": 256.0}, {"announced": None}], "latex")
    assert "256 \\\\" in latex and "--- \\\\" in latex and "256.0" not in latex


def test_every_command_resamples_10000_times_by_default_the_audit_too():
    import click

    from mindcap_tok.audits.suite import AuditConfig

    ctx = click.Context(cli)

    def walk(group, path=()):
        for name in group.list_commands(ctx):  # the CLI loads its commands lazily
            cmd = group.get_command(ctx, name)
            if isinstance(cmd, click.Group):
                yield from walk(cmd, (*path, name))
            else:
                yield (*path, name), cmd

    defaults = {
        " ".join(path): p.default
        for path, cmd in walk(cli)
        for p in cmd.params
        if isinstance(p, click.Option) and "--n-boot" in p.opts
    }
    assert {"audit", "sweep", "premium", "price", "confirm"} <= set(defaults)
    assert set(defaults.values()) == {10_000}, defaults
    assert AuditConfig().resampling.n_boot == 10_000  # the library's suite, as the CLI


def test_a_trace_premium_headline_from_few_traces_says_how_few(tmp_path):
    import pandas as pd

    from mindcap_tok.audits import AuditResult, SuiteResult, write_audit_report

    def report(traces, items):
        delta = pd.DataFrame(
            [
                {"normalizer": n, "lang": "tha_Thai", "budget": 256, "delta": d, "peak": True}
                for n, d in (("flores", 0.2), ("trace", 0.1))
            ]
        )
        trace = pd.DataFrame([{"model": "m", "lang": "tha_Thai", "traces": traces, "items": items, "r_trace": 2.1}])
        res = AuditResult("normalizer", tables={"delta": delta, "trace_premium": trace}, summary={"sesoi": 0.05})
        out = tmp_path / f"a{traces}"
        write_audit_report(SuiteResult(ledger="L", records=traces, results=[res]), out)
        return (out / "audit.md").read_text("utf-8")

    few = report(2, 2)
    assert "trace +10.0 (r_trace from 2 rendered traces; only 2 items in a cell: a rough estimate)" in few
    many = report(400, 100)
    assert "(r_trace from 400 rendered traces)" in many and "rough estimate" not in many


def test_audit_sesoi_given_in_points_reads_as_both_in_the_report(tmp_path, ledger):
    out = tmp_path / "audit"
    res = run(
        [
            "audit",
            "--ledger",
            ledger,
            "--out-dir",
            out,
            "--only",
            "normalizer",
            "--premiums",
            "th=2",
            "--sesoi",
            "5",
            "--n-boot",
            "200",
        ]
    )
    assert res.exit_code == 0, res.output
    report = json.loads((out / "audit.json").read_text())
    (normalizer,) = report["audits"]
    assert normalizer["summary"]["sesoi"] == 0.05  # JSON holds fractions, as every JSON output
    md = (out / "audit.md").read_text("utf-8")
    assert "sesoi=0.05 (= 5 points)" in md
    assert "Units: settings, tables and `audit.json` hold fractions" in md


def test_latex_tables_are_ascii_with_the_symbols_as_latex_commands():
    from mindcap_tok._tables import render

    rows = [{"arm": "translate-act", "note": "B → floor(r·B), Δ ≤ 0.05 × 2 … ρ"}]
    latex = render(rows, "latex")
    assert latex.isascii(), [c for c in latex if not c.isascii()]
    # each symbol as the command written by hand for it, and LaTeX's specials escaped by pandas
    expected = r"B $\rightarrow$ floor(r$\cdot$B), $\Delta$ $\leq$ 0.05 $\times$ 2 \ldots{} $\rho$"
    assert expected in latex and "translate-act" in latex


def test_premium_markdown_and_latex_show_the_tokenizer_hash_abbreviated(qwen):
    args = ["premium", "--model", "qwen3-8b", "--lang", "th", "--n-boot", "40"]
    full = qwen.sha256
    csv = run([*args, "--format", "csv"]).stdout
    assert f",{full}," in csv  # machine-readable output keeps the whole hash
    for fmt in ("md", "latex"):
        res = run([*args, "--format", fmt])
        assert res.exit_code == 0, res.output
        assert full not in res.stdout and full[:12] in res.stdout and "tokenizer" in res.stdout, fmt
        assert "sha256" not in res.stdout.split("\n", 1)[0], fmt  # the header names what is shown: 12 digits
