"""What imports read is bounded: inspect logs are checked against inflated-size limits before inspect reads them
(declared sizes, then a streaming inflate that stops past the limit), lines, samples and results files against
byte limits before they are parsed; a FIFO where a log is expected is refused by name, never opened."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import BadInputError, MindcapError
from mindcap_tok.ingest import inspect_logs as import_inspect
from mindcap_tok.ingest import jsonl as importer
from mindcap_tok.ingest import lmeval as import_lmeval
from mindcap_tok.ingest.inspect_logs import check_log_size, log_files
from mindcap_tok.ingest.jsonl import import_jsonl
from mindcap_tok.store.ledger import Ledger
from zip_logs import DEFLATED, STORED, ZSTANDARD, deflate, write_zip, zeros_zstd

REPO = Path(__file__).resolve().parents[1]
MIB = 1 << 20
TIME = "2026-01-01T00-00-00.000000"


@pytest.fixture(autouse=True)
def no_hang():
    """Fail a test that blocks (a FIFO opened) instead of hanging the run."""

    def stuck(*_):
        raise TimeoutError("blocked: a FIFO was opened")

    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture
def small_limits(monkeypatch):
    """Limits of 1 MiB per member and 3 MiB per log, so that bombs stay small in the tests."""
    monkeypatch.setattr(import_inspect, "MEMBER_LIMIT", MIB)
    monkeypatch.setattr(import_inspect, "LOG_LIMIT", 3 * MIB)


@pytest.fixture
def no_inspect_read(monkeypatch):
    """An ``inspect_ai.log`` whose reader fails the test: the guard must refuse before inspect reads a log."""
    module = types.ModuleType("inspect_ai.log")

    def read_eval_log(path, *args, **kwargs):
        raise AssertionError(f"inspect was handed {path}")

    module.read_eval_log = read_eval_log
    monkeypatch.setitem(sys.modules, "inspect_ai", types.ModuleType("inspect_ai"))
    monkeypatch.setitem(sys.modules, "inspect_ai.log", module)


def _one_line(res, pattern: str) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and re.search(pattern, lines[0]), res.output
    return lines[0]


def _import(*args) -> object:
    return CliRunner().invoke(cli, ["ledger", "import", *map(str, args)])


# -- inspect logs: limits on what they inflate to ------------------------------------------------------------------


@pytest.mark.parametrize("method", [STORED, DEFLATED, ZSTANDARD])
def test_a_member_at_the_limit_passes_one_byte_more_is_refused(tmp_path, small_limits, method):
    """Each method's member inflated and counted: exactly the limit passes, one byte more is refused, also when
    the zip declares a small size (a lying header)."""
    pack = {STORED: bytes, DEFLATED: deflate, ZSTANDARD: lambda d: zeros_zstd(1, len(d))}[method]
    at_limit = write_zip(tmp_path / "ok.eval", [("header.json", pack(b"\0" * MIB), method, MIB)])
    assert check_log_size(at_limit) is None
    for declared in (MIB + 1, 10):
        over = write_zip(
            tmp_path / f"over{declared}.eval", [("header.json", pack(b"\0" * (MIB + 1)), method, declared)]
        )
        with pytest.raises(BadInputError, match=r"over\d+\.eval: member 'header\.json' (declares|inflates to) "):
            check_log_size(over)


def test_members_are_limited_together(tmp_path, small_limits):
    """Four members of 1 MiB (each within its limit) hold 4 MiB, more than the 3 MiB per log."""
    four = [(f"samples/{i}_epoch_1.json", zeros_zstd(1, MIB), ZSTANDARD, MIB) for i in range(4)]
    with pytest.raises(BadInputError, match=r"members declare 4 MiB inflated, more than the limit 3 MiB per log"):
        check_log_size(write_zip(tmp_path / "declared.eval", four))
    lying = [(name, data, method, 1) for name, data, method, _ in four]
    with pytest.raises(BadInputError, match=r"members inflate to more than the limit 3 MiB per log"):
        check_log_size(write_zip(tmp_path / "lying.eval", lying))
    assert check_log_size(write_zip(tmp_path / "three.eval", four[:3])) is None


def test_a_json_log_is_limited_by_its_size(tmp_path, small_limits):
    (tmp_path / "ok.json").write_bytes(b" " * (3 * MIB))
    assert check_log_size(tmp_path / "ok.json") is None
    (tmp_path / "big.json").write_bytes(b" " * (3 * MIB + 1))
    with pytest.raises(BadInputError, match=r"big\.json: the inspect log holds 3 MiB, more than the limit 3 MiB"):
        check_log_size(tmp_path / "big.json")


@pytest.mark.parametrize(
    ("flags", "method", "data", "message"),
    [
        (1, DEFLATED, deflate(b"{}"), r"member 'header\.json' is encrypted"),
        (0, 12, b"BZh9", r"member 'header\.json' uses zip compression method 12, which inspect does not write"),
        (0, DEFLATED, deflate(b"x" * 5000)[:8], r"member 'header\.json' cannot be read \(.*\): not a readable"),
        (0, ZSTANDARD, zeros_zstd(1, 5000)[:9], r"member 'header\.json' cannot be read \(.*\): not a readable"),
    ],
)
def test_members_inspect_cannot_read_are_one_line(tmp_path, flags, method, data, message):
    log = write_zip(tmp_path / "bad.eval", [("header.json", data, method, 5000)], flags=flags)
    with pytest.raises(BadInputError, match=message):
        check_log_size(log)
    (tmp_path / "notzip.eval").write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(BadInputError, match=r"notzip\.eval: not a readable inspect log \(not a zip archive"):
        check_log_size(tmp_path / "notzip.eval")


def test_the_default_limits_hold_memory_down(tmp_path):
    """A 67 KB log whose one member declares 100 bytes and inflates to 2 GiB (Zstandard), checked with the real
    limits in a fresh process: refused, with the peak memory grown by a few MiB (inflating it whole: 2 GiB)."""
    log = write_zip(tmp_path / "bomb.eval", [("header.json", zeros_zstd(128), ZSTANDARD, 100)])
    assert log.stat().st_size < 100_000
    code = (
        "import resource, sys\n"
        "from mindcap_tok.errors import BadInputError\n"
        "from mindcap_tok.ingest.inspect_logs import LOG_LIMIT, MEMBER_LIMIT, check_log_size\n"
        "assert (MEMBER_LIMIT, LOG_LIMIT) == (256 << 20, 1 << 30)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n"
        "    check_log_size(__import__('pathlib').Path(sys.argv[1]))\n"
        "except BadInputError as exc:\n"
        "    print(exc)\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"  # KiB -> MiB
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    message, grown = proc.stdout.strip().splitlines()
    assert message == f"{log}: member 'header.json' inflates to more than the limit 256 MiB per member"
    assert int(grown) < 64, f"peak memory grew by {grown} MiB"


def test_the_cli_refuses_a_bomb_before_inspect_reads_it(tmp_path, small_limits, no_inspect_read):
    """The reproducer's shape: a small .eval whose member inflates past the limit; one line, exit 2, no ledger,
    and inspect's reader never called (it would fail the test)."""
    (tmp_path / "logs").mkdir()
    write_zip(tmp_path / "logs" / "a.eval", [("header.json", zeros_zstd(1, MIB // 2), ZSTANDARD, MIB // 2)])
    write_zip(tmp_path / "logs" / "b.eval", [("header.json", zeros_zstd(2, MIB), ZSTANDARD, 100)])
    res = _import(tmp_path / "logs", "--from", "inspect", "--tokenizer", "qwen3", "--out-dir", tmp_path / "L")
    _one_line(res, r"^error: .*logs/b\.eval: member 'header\.json' inflates to more than the limit 1 MiB per member$")
    assert not (tmp_path / "L").exists()


# -- FIFOs where logs are expected -----------------------------------------------------------------------------


def test_a_fifo_inspect_log_is_named_as_one(tmp_path):
    os.mkfifo(tmp_path / "run.eval")
    with pytest.raises(MindcapError, match=r"inspect log .*run\.eval is a FIFO \(named pipe\), not a regular file"):
        log_files([tmp_path / "run.eval"])
    (tmp_path / "logs").mkdir()
    write_zip(tmp_path / "logs" / "a.eval", [("header.json", b"{}", STORED, 2)])
    os.mkfifo(tmp_path / "logs" / "b.json")
    with pytest.raises(MindcapError, match=r"inspect log .*logs/b\.json is a FIFO"):
        log_files([tmp_path / "logs"])
    res = _import(tmp_path / "run.eval", "--from", "inspect", "--tokenizer", "qwen3", "--out-dir", tmp_path / "L")
    _one_line(res, r"run\.eval is a FIFO \(named pipe\), not a regular file")


def _lmeval_run(folder: Path, *, lines: list | None = None, results: object = None) -> Path:
    """An lm-eval output folder: one MGSM Thai samples file (two docs, two filters each) and a results file."""
    folder.mkdir(parents=True, exist_ok=True)
    if lines is None:
        args = {"gen_args_0": {"arg_0": "โจทย์", "arg_1": {"max_gen_toks": 16}}}
        lines = [
            {"doc_id": d, "target": str(d + 1), "filter": f, "arguments": args, "resps": [[f"ans {d + 1}"]]}
            for d in range(2)
            for f in ("strict-match", "flexible-extract")
        ]
    text = "".join(line if isinstance(line, str) else json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    (folder / f"samples_mgsm_native_cot_th_{TIME}.jsonl").write_text(text, "utf-8")
    if results is not None:
        (folder / f"results_{TIME}.json").write_text(json.dumps(results), "utf-8")
    return folder


def _lmeval_import(logs: Path, ledger: Path):
    return _import(logs, "--from", "lm-eval", "--tokenizer", "qwen3-8b", "--out-dir", ledger)


@pytest.mark.parametrize("name", [f"samples_mgsm_native_cot_de_{TIME}.jsonl", f"results_{TIME}.json"])
def test_a_fifo_in_an_lm_eval_folder_is_refused_by_name(tmp_path, name):
    """A FIFO named like a samples or results file is not skipped: nothing is imported, and the line names it."""
    run = _lmeval_run(tmp_path / "run")
    os.mkfifo(run / name)
    res = _lmeval_import(run, tmp_path / "L")
    _one_line(res, rf"{name.replace('.', '[.]')} is a FIFO \(named pipe\), not a regular file")
    assert not (tmp_path / "L").exists()
    os.unlink(run / name)
    assert _lmeval_import(run, tmp_path / "L").exit_code == 0  # the control: without the FIFO it imports


def test_a_fifo_given_as_an_lm_eval_file_is_named_as_one(tmp_path):
    os.mkfifo(tmp_path / f"samples_x_{TIME}.jsonl")
    res = _lmeval_import(tmp_path / f"samples_x_{TIME}.jsonl", tmp_path / "L")
    _one_line(res, r"lm-eval samples file .* is a FIFO \(named pipe\), not a regular file")


# -- byte limits on lines and files ------------------------------------------------------------------------------


def test_a_jsonl_line_over_the_limit_is_refused_before_parsing(tmp_path, qwen, monkeypatch):
    line = json.dumps(make_record(qwen, "9 + 9 = 18\n#### 18"), ensure_ascii=False).encode() + b"\n"
    (tmp_path / "gen.jsonl").write_bytes(line)
    monkeypatch.setattr(importer, "LINE_LIMIT", len(line) - 2)
    with pytest.raises(MindcapError, match=rf"gen\.jsonl:1: line longer than {len(line) - 2:,} bytes"):
        import_jsonl(tmp_path / "gen.jsonl", tmp_path / "L", tokenizer=qwen)
    assert not Ledger(tmp_path / "L").exists()
    monkeypatch.setattr(importer, "LINE_LIMIT", len(line) - 1)  # the line without its newline: at the limit
    assert import_jsonl(tmp_path / "gen.jsonl", tmp_path / "L", tokenizer=qwen).read == 1


def test_batches_are_committed_by_bytes_too(tmp_path, qwen, monkeypatch):
    """Four one-cell records: one commit (one shard) by default, one per record when each line fills a batch."""
    lines = [json.dumps(make_record(qwen, f"#### {i}", item=i, gold=i)) + "\n" for i in range(4)]
    (tmp_path / "gen.jsonl").write_text("".join(lines))
    assert len(import_jsonl(tmp_path / "gen.jsonl", tmp_path / "A", tokenizer=qwen).shards) == 1
    monkeypatch.setattr(importer, "BATCH_BYTES", min(map(len, lines)))
    assert len(import_jsonl(tmp_path / "gen.jsonl", tmp_path / "B", tokenizer=qwen).shards) == 4
    assert Ledger(tmp_path / "A").to_pandas().equals(Ledger(tmp_path / "B").to_pandas())


def test_lm_eval_files_over_their_limits_are_refused(tmp_path, monkeypatch):
    run = _lmeval_run(tmp_path / "run", results={"configs": {}})
    samples = run / f"samples_mgsm_native_cot_th_{TIME}.jsonl"
    monkeypatch.setattr(import_lmeval, "SAMPLES_LIMIT", samples.stat().st_size - 1)
    _one_line(_lmeval_import(run, tmp_path / "L"), r"the samples files hold .* bytes, more than the .* bytes one")
    monkeypatch.setattr(import_lmeval, "SAMPLES_LIMIT", samples.stat().st_size)
    monkeypatch.setattr(import_lmeval, "RESULTS_LIMIT", (run / f"results_{TIME}.json").stat().st_size - 1)
    _one_line(_lmeval_import(run, tmp_path / "L"), r"results_.*\.json: more than .* bytes, not an lm-eval results")
    assert not (tmp_path / "L").exists()
    monkeypatch.setattr(import_lmeval, "RESULTS_LIMIT", (run / f"results_{TIME}.json").stat().st_size)
    assert _lmeval_import(run, tmp_path / "L").exit_code == 0
