"""Nothing blocks on a non-regular file: a FIFO (or a folder or a device) where a shard, a manifest, a tokenizer
file or an input file is expected is one line, at once. A FIFO with no writer blocks whoever opens it, so every
test here runs under a timeout: a regression fails instead of hanging the suite."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok._io import regular_file
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.store.ledger import Ledger

REPO = Path(__file__).resolve().parents[1]
FIFO = r"is a FIFO \(named pipe\), not a regular file"


class Blocked(Exception):
    """A test sat in a blocking call for 60 s."""


@pytest.fixture(autouse=True)
def no_hang():
    """Interrupt a test that blocks (opening a FIFO) after 60 s (a loaded machine may need 10 s to start a
    subprocess); ``open`` is retried on EINTR unless this raises."""

    def stuck(*_):
        raise Blocked("blocked on a non-regular file")  # not an OSError: no reader may take it for one

    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def cli_in_subprocess(*args: str) -> subprocess.CompletedProcess:
    """The CLI in a child process (Arrow opens shards in C++, where no signal interrupts a blocked open)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "mindcap_tok", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=REPO, env=env)


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


# -- the helper -----------------------------------------------------------------------------------------------------
def test_regular_file_checks_without_opening(tmp_path):
    plain = tmp_path / "a.txt"
    plain.write_text("a")
    assert regular_file(plain, "input") == plain
    assert regular_file(tmp_path / "absent", "input") == tmp_path / "absent"  # the caller says "not found"
    with pytest.raises(MindcapError, match=f"input {tmp_path / 'p'} {FIFO}"):
        regular_file(fifo(tmp_path / "p"), "input")
    with pytest.raises(MindcapError, match="is a folder, not a regular file"):
        regular_file(tmp_path, "input")
    with pytest.raises(MindcapError, match="is a device or other special file"):
        regular_file("/dev/null", "input")
    read, write = os.pipe()  # a pipe the shell opened (standard input, <(...)): only where the caller reads pipes
    try:
        assert regular_file(f"/proc/self/fd/{read}", "input", pipe_ok=True) == Path(f"/proc/self/fd/{read}")
        with pytest.raises(MindcapError, match=FIFO):
            regular_file(f"/proc/self/fd/{read}", "input")
        with pytest.raises(MindcapError, match=FIFO):
            regular_file(tmp_path / "p", "input", pipe_ok=True)  # a named FIFO is never opened
    finally:
        os.close(read)
        os.close(write)


# -- ledgers --------------------------------------------------------------------------------------------------------
@pytest.fixture
def ledger(tmp_path, qwen):
    root = tmp_path / "led"
    Ledger(root).append([make_record(qwen, "#### 18\n"), make_record(qwen, "#### 17\n", item=1)], qwen)
    return root


def _shard(root: Path) -> Path:
    return root / json.loads((root / "_manifest.json").read_text())["shards"][0]["path"]


@pytest.mark.parametrize(
    "args",
    [
        ["score", "--ledger", "{root}", "--budgets", "20"],
        ["score", "--ledger", "{root}", "--budgets", "20", "--no-verify"],
    ],
    ids=["score", "score --no-verify"],
)
def test_a_fifo_shard_is_one_line_for_score(ledger, args):
    shard = _shard(ledger)
    shard.unlink()
    fifo(shard)
    proc = cli_in_subprocess(*(a.format(root=ledger) for a in args))
    assert proc.returncode == 2
    assert f"ledger shard {shard} is a FIFO" in one_line(proc.stderr)


def test_a_fifo_shard_is_a_problem_for_ledger_verify(ledger):
    shard = _shard(ledger)
    shard.unlink()
    fifo(shard)
    proc = cli_in_subprocess("ledger", "verify", str(ledger))
    assert proc.returncode != 0
    assert "is a FIFO (named pipe), not a regular file" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    with pytest.raises(MindcapError, match=FIFO):
        Ledger(ledger).read()


def test_a_folder_shard_and_a_fifo_manifest_are_one_line(ledger):
    shard = _shard(ledger)
    shard.unlink()
    shard.mkdir()
    with pytest.raises(MindcapError, match="is a folder, not a regular file"):
        Ledger(ledger).read()
    (ledger / "_manifest.json").unlink()
    fifo(ledger / "_manifest.json")
    with pytest.raises(MindcapError, match=f"ledger manifest .* {FIFO}"):
        Ledger(ledger).manifest()
    res = CliRunner().invoke(cli, ["ledger", "info", str(ledger)])
    assert res.exit_code == 2 and "is a FIFO" in res.stderr


def test_a_fifo_lock_file_does_not_block_readers(ledger):
    (ledger / ".lock").unlink()
    fifo(ledger / ".lock")
    start = time.monotonic()
    assert len(Ledger(ledger).read()) == 2
    assert time.monotonic() - start < 5


def test_ledger_import_refuses_a_fifo_but_reads_standard_input(tmp_path, qwen):
    res = CliRunner().invoke(
        cli, ["ledger", "import", str(fifo(tmp_path / "gen.jsonl")), "--out-dir", str(tmp_path / "L")]
    )
    assert res.exit_code == 2 and f"input {tmp_path / 'gen.jsonl'} is a FIFO" in res.stderr, res.output
    assert not (tmp_path / "L").exists()
    line = json.dumps(make_record(qwen, "#### 18\n")) + "\n"
    proc = subprocess.run(
        [sys.executable, "-m", "mindcap_tok", "ledger", "import", "/dev/stdin", "--out-dir", str(tmp_path / "S")],
        input=line,
        capture_output=True,
        text=True,
        timeout=50,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert proc.returncode == 0 and "imported 1 of 1" in proc.stderr and proc.stdout == "", proc.stderr


# -- tokenizers -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tokenizer.json", "x.tiktoken", "x.model"])
def test_a_fifo_tokenizer_file_is_one_line(tmp_path, name):
    from mindcap_tok.tokenization.load import load_tokenizer

    path = fifo(tmp_path / "tok" / name)
    (tmp_path / "tok" / "encoding.json").write_text('{"name": "x", "pat_str": ".", "special_tokens": {}}')
    for given in (path, path.parent):  # the file itself, or the folder that holds it
        with pytest.raises(MindcapError, match=f"tokenizer file .*{name} {FIFO}"):
            load_tokenizer(str(given))


def test_a_fifo_encoding_json_is_one_line(tmp_path, config):
    from mindcap_tok.tokenization.load import load_tokenizer

    folder = tmp_path / "o200k"
    folder.mkdir()
    shutil.copyfile(config.tokenizers_dir.value / "o200k_base" / "o200k_base.tiktoken", folder / "o200k.tiktoken")
    fifo(folder / "encoding.json")
    with pytest.raises(MindcapError, match=f"tiktoken encoding file .*encoding.json {FIFO}"):
        load_tokenizer(str(folder))


# -- input files ----------------------------------------------------------------------------------------------------
def _load_job_spec(path):
    from mindcap_tok.generation.jobs import load_spec

    return load_spec(path)


def _load_protocol(path):
    from mindcap_tok.stats.protocol import load_protocol

    return load_protocol(path)


def _read_roundtrip_spec(path):
    from mindcap_tok.roundtrip.spec import read_spec_file

    return read_spec_file(path)


def _roundtrip_texts(path):
    from mindcap_tok.roundtrip.texts import file_texts

    return file_texts(path)


def _corpus(path):
    from mindcap_tok.adaptation.corpus import text_file_corpus

    return text_file_corpus(path)


@pytest.mark.parametrize(
    ("reader", "name", "what"),
    [
        (_load_job_spec, "job.toml", "job spec"),
        (_load_protocol, "protocol.toml", "protocol"),
        (_read_roundtrip_spec, "rt.toml", "round-trip spec"),
        (_roundtrip_texts, "texts.jsonl", "texts file"),
        (_corpus, "corpus.txt", "corpus file"),
    ],
    ids=["job spec", "protocol", "round-trip spec", "round-trip texts", "corpus"],
)
def test_a_fifo_input_file_is_one_line(tmp_path, reader, name, what):
    path = fifo(tmp_path / name)
    with pytest.raises(MindcapError, match=f"{what} {path} {FIFO}"):
        reader(path)


def test_fifo_flores_and_mgsm_files_are_one_line(tmp_path):
    from mindcap_tok.data.flores import load_flores
    from mindcap_tok.tasks.mgsm import load_mgsm

    fifo(tmp_path / "flores200" / "devtest" / "tha_Thai.devtest")
    with pytest.raises(MindcapError, match=f"FLORES file .*tha_Thai.devtest {FIFO}"):
        load_flores("th", "devtest", source=str(tmp_path / "flores200"))
    fifo(tmp_path / "mgsm" / "mgsm_th.tsv")
    with pytest.raises(MindcapError, match=f"MGSM file .*mgsm_th.tsv {FIFO}"):
        load_mgsm("th", tmp_path)


def test_generate_and_protocol_commands_refuse_a_fifo_in_one_line(tmp_path):
    spec = fifo(tmp_path / "job.toml")
    for args in (
        ["generate", str(spec), "--dry-run", "--out-dir", str(tmp_path / "L")],
        ["protocol", "freeze", str(spec)],
    ):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2 and "is a FIFO" in one_line(res.stderr), (args, res.output)


def test_a_fifo_freeze_record_is_one_line(tmp_path, ledger):
    protocol = tmp_path / "protocol.toml"
    protocol.write_text("")
    fifo(tmp_path / "protocol.toml.freeze.json")
    res = CliRunner().invoke(cli, ["protocol", "test", str(protocol), "--ledger", str(ledger)])
    assert res.exit_code == 2 and f"freeze record {tmp_path / 'protocol.toml.freeze.json'} is a FIFO" in one_line(
        res.stderr
    ), res.output
