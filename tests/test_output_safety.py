"""Outputs never cost the user data: output folders hold only the command's own files, nothing is written into
a ledger, files get the user's umask, and empty option values are errors rather than silent defaults."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok._io import OUTPUT_MARKER, atomic_write_text, check_output_folder, output_folder
from mindcap_tok.cli.main import cli, main
from mindcap_tok.errors import MindcapError
from mindcap_tok.store.ledger import Ledger

REPORT = ["--premiums", "th=3", "--budgets", "20,30", "--n-boot", "50"]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, qwen):
    records = [
        make_record(
            qwen, f"Thinking.\n#### {10 + item + (sample == 1)}\n", arm=arm, item=item, sample=sample, gold=10 + item
        )
        for arm in ("native", "translate-act")
        for item in range(3)
        for sample in range(2)
    ]
    root = tmp_path_factory.mktemp("ledger")
    Ledger(root).append(records, qwen)
    return root


def run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_report_refuses_a_folder_with_other_files(ledger, tmp_path):
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "thesis.txt").write_text("three years of work")
    res = run(["report", "--ledger", str(ledger), *REPORT, "--out-dir", str(out)])
    assert res.exit_code != 0
    assert "thesis.txt" in res.output and "did not write" in res.output
    assert _snapshot(out) == {"thesis.txt": b"three years of work"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis"]  # no staging folder left beside it


def test_report_never_writes_over_or_into_a_ledger(ledger, tmp_path):
    before = _snapshot(ledger)
    for target in (ledger, ledger / "reports", ledger / "model=qwen3-8b"):
        res = run(["report", "--ledger", str(ledger), *REPORT, "--out-dir", str(target)])
        assert res.exit_code != 0 and "ledger" in res.output, res.output
    assert _snapshot(ledger) == before


def test_report_rerun_replaces_only_its_own_files(ledger, tmp_path):
    out = tmp_path / "rep"
    assert run(["report", "--ledger", str(ledger), *REPORT, "--out-dir", str(out)]).exit_code == 0
    marker = json.loads((out / OUTPUT_MARKER).read_text())
    assert marker["producer"] == "mindcap-tok report" and "report.md" in marker["files"]
    first = set(_snapshot(out))
    res = run(["report", "--ledger", str(ledger), *REPORT, "--out-dir", str(out)])  # its own output: replaced
    assert res.exit_code == 0, res.output
    assert set(_snapshot(out)) == first
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]  # the swapped-out copy is gone

    (out / "notes.md").write_text("mine")
    res = run(["report", "--ledger", str(ledger), *REPORT, "--out-dir", str(out)])
    assert res.exit_code != 0 and "notes.md" in res.output
    (out / "notes.md").unlink()

    (out / "report.md").write_text("edited by hand")
    res = run(["report", "--ledger", str(ledger), *REPORT, "--out-dir", str(out)])
    assert res.exit_code != 0 and "changed" in res.output
    assert (out / "report.md").read_text() == "edited by hand"


def test_other_commands_output_is_not_replaced(ledger, tmp_path):
    out = tmp_path / "scores"
    res = run(["score", "--ledger", str(ledger), "--budgets", "20", "--save", str(out), "--format", "json"])
    assert res.exit_code == 0, res.output
    res = run(["report", "--ledger", str(ledger), *REPORT, "--out-dir", str(out)])
    assert res.exit_code != 0 and "mindcap-tok score --save" in res.output
    assert {"by_budget.parquet", "by_record.parquet"} <= set(_snapshot(out))


def test_score_save_and_audit_refuse_foreign_folders(ledger, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "by_record.parquet").write_bytes(b"not yours")
    res = run(["score", "--ledger", str(ledger), "--budgets", "20", "--save", str(out)])
    assert res.exit_code != 0 and "did not write" in res.output
    res = run(["audit", "--ledger", str(ledger), "--only", "parity", "--out-dir", str(out)])
    assert res.exit_code != 0 and "did not write" in res.output
    assert _snapshot(out) == {"by_record.parquet": b"not yours"}


def test_out_file_never_over_the_manifest(ledger, tmp_path):
    manifest = (ledger / "_manifest.json").read_bytes()
    res = run(["ledger", "info", str(ledger), "--format", "json", "--out", str(ledger / "_manifest.json")])
    assert res.exit_code != 0 and "inside the ledger" in res.output
    assert (ledger / "_manifest.json").read_bytes() == manifest
    res = run(["ledger", "info", str(ledger), "--format", "json", "--out", str(tmp_path)])
    assert res.exit_code != 0 and "is a directory" in res.output  # click's own check of dir_okay=False
    with pytest.raises(MindcapError, match="is a folder"):  # the library's, for callers outside the CLI
        atomic_write_text(tmp_path, "{}")


def test_empty_folder_and_nested_output(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    with output_folder(out, "test") as tmp:
        (tmp / "sub").mkdir()
        (tmp / "sub" / "a.txt").write_text("a")
    assert _snapshot(out).keys() == {"sub/a.txt", OUTPUT_MARKER}
    with output_folder(out, "test") as tmp:  # rerun: the old sub/a.txt goes, b.txt comes
        (tmp / "b.txt").write_text("b")
    assert _snapshot(out).keys() == {"b.txt", OUTPUT_MARKER}
    with pytest.raises(MindcapError, match="`test`"):
        check_output_folder(out, "other")
    with pytest.raises(RuntimeError), output_folder(out, "test") as tmp:  # a failure leaves the old output
        (tmp / "c.txt").write_text("c")
        raise RuntimeError("boom")
    assert _snapshot(out).keys() == {"b.txt", OUTPUT_MARKER}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_marker_cannot_name_files_outside_the_folder(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / OUTPUT_MARKER).write_text(json.dumps({"producer": "test", "files": {"../victim.txt": "x"}}))
    with pytest.raises(MindcapError, match="did not write"):
        check_output_folder(out, "test")
    assert victim.read_text() == "keep"


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_files_get_the_users_umask(tmp_path, mask):
    old = os.umask(mask)
    try:
        f = atomic_write_text(tmp_path / "a.json", "{}")
        with output_folder(tmp_path / "out", "test") as tmp:
            (tmp / "x.csv").write_text("x")
        plain = tmp_path / "plain"
        plain.write_text("")  # what open() gives under this umask
        plain_dir = tmp_path / "plain_dir"
        plain_dir.mkdir()
    finally:
        os.umask(old)
    mode = stat.S_IMODE
    assert mode(f.stat().st_mode) == mode(plain.stat().st_mode) == 0o666 & ~mask
    assert mode((tmp_path / "out" / "x.csv").stat().st_mode) == 0o666 & ~mask
    assert mode((tmp_path / "out").stat().st_mode) == mode(plain_dir.stat().st_mode) == 0o777 & ~mask


def test_ledger_manifest_gets_the_users_umask(tmp_path, qwen):
    old = os.umask(0o022)
    try:
        Ledger(tmp_path / "led").append([make_record(qwen, "#### 18\n")], qwen)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "led" / "_manifest.json").stat().st_mode) == 0o644


@pytest.mark.parametrize("args", [["--lang", ""], ["--lang="], ["--lang", "de,,th"], ["--model", ""]])
def test_empty_values_are_errors_not_defaults(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["premium", *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "empty value" in err[-1] and "Traceback" not in "\n".join(err)


def _alter_one_token_id(ledger_root):
    """Rewrite the first native shard as valid Parquet with one token id changed: only the hash can tell."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    manifest = json.loads((ledger_root / "_manifest.json").read_text())
    shard = ledger_root / next(s["path"] for s in manifest["shards"] if s["arm"] == "native")
    table = pq.read_table(shard)
    ids = table.column("output_ids").to_pylist()
    ids[0][0] = 124488
    col = table.schema.get_field_index("output_ids")
    table = table.set_column(col, table.schema.field(col), pa.array(ids, table.schema.field(col).type))
    pq.write_table(table, shard, compression="zstd")
    return shard


@pytest.fixture
def damaged(tmp_path, qwen):
    root = tmp_path / "damaged"
    records = [
        make_record(qwen, f"#### {10 + item}\n", arm=arm, item=item, gold=10 + item)
        for arm in ("native", "translate-act")
        for item in range(3)
    ]
    Ledger(root).append(records, qwen)
    return root, _alter_one_token_id(root)


@pytest.mark.parametrize(
    "args",
    [
        ["ledger", "info", "{ledger}"],
        ["score", "--ledger", "{ledger}", "--budgets", "20"],
        ["sweep", "--ledger", "{ledger}", "--premiums", "th=3", "--budgets", "20", "--n-boot", "40"],
        [
            "report",
            "--ledger",
            "{ledger}",
            "--premiums",
            "th=3",
            "--budgets",
            "20",
            "--n-boot",
            "40",
            "--out-dir",
            "{tmp}/rep",
        ],
        ["audit", "--ledger", "{ledger}", "--only", "parity", "--out-dir", "{tmp}/aud"],
        [
            "price",
            "--ledger",
            "{ledger}",
            "--lang",
            "th",
            "--cap",
            "20",
            "--learn-extension",
            "--size",
            "1",
            "--no-premium",
        ],
    ],
    ids=lambda a: a[0] if a[0] != "ledger" else "ledger info",
)
def test_every_reader_notices_an_altered_shard(damaged, tmp_path, args):
    root, shard = damaged
    res = run([a.format(ledger=root, tmp=tmp_path) for a in args])
    assert res.exit_code != 0
    assert shard.name in res.output and "ledger verify" in res.output, res.output
    assert not (tmp_path / "rep").exists() and not (tmp_path / "aud").exists()


def test_no_verify_skips_the_check(damaged):
    root, shard = damaged
    checked = run(["score", "--ledger", str(root), "--budgets", "20"])
    unchecked = run(["score", "--ledger", str(root), "--budgets", "20", "--no-verify"])
    assert shard.name in checked.output and checked.exit_code != 0
    assert unchecked.exit_code == 0 and "tha_Thai" in unchecked.output  # read as it is now, unchecked


def test_a_ledger_is_never_started_among_other_files(tmp_path, qwen):
    folder = tmp_path / "thesis"
    folder.mkdir()
    (folder / "thesis.txt").write_text("mine")
    lines = tmp_path / "gen.jsonl"
    lines.write_text(json.dumps(make_record(qwen, "#### 18\n")) + "\n")
    res = run(["ledger", "import", str(lines), "--out-dir", str(folder)])
    assert res.exit_code != 0 and "thesis.txt" in res.output and "not a ledger" in res.output
    assert sorted(p.name for p in folder.iterdir()) == ["thesis.txt"]
    with pytest.raises(MindcapError, match="not a ledger"):
        Ledger(folder).append([make_record(qwen, "#### 18\n")], qwen)
    assert sorted(p.name for p in folder.iterdir()) == ["thesis.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(["ledger", "import", str(lines), "--out-dir", str(empty)]).exit_code == 0
    assert len(Ledger(empty)) == 1


def test_out_names_files_and_out_dir_folders(ledger, tmp_path):
    assert run(["report", "--ledger", str(ledger), *REPORT, "--out-dir", str(tmp_path / "a")]).exit_code == 0
    assert (tmp_path / "a" / "report.md").is_file()
    res = run(["report", "--ledger", str(ledger), *REPORT, "--out", str(tmp_path / "b")])  # --out is for files
    assert res.exit_code == 2 and "No such option '--out'" in res.stderr and not (tmp_path / "b").exists()
    res = run(["report", "--ledger", str(ledger), *REPORT])
    assert res.exit_code == 2 and "--out-dir" in res.output


# -- output folders never act outside themselves ---------------------------------------------------------
def _sha(path):
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _list_in_marker(out, name, digest):
    marker = json.loads((out / OUTPUT_MARKER).read_text())
    marker["files"][name] = digest
    (out / OUTPUT_MARKER).write_text(json.dumps(marker))


def test_score_rerun_never_deletes_through_a_symlinked_subfolder(ledger, tmp_path):
    out, elsewhere = tmp_path / "scores", tmp_path / "elsewhere"
    args = ["score", "--ledger", str(ledger), "--budgets", "20", "--save", str(out), "--format", "json"]
    assert run(args).exit_code == 0
    elsewhere.mkdir()
    (elsewhere / "thesis.txt").write_text("three years of work")
    (out / "sub").symlink_to(elsewhere, target_is_directory=True)
    _list_in_marker(out, "sub/thesis.txt", _sha(elsewhere / "thesis.txt"))
    before = _snapshot(out)
    res = run(args)
    assert res.exit_code == 2, res.output
    assert "sub is a symlink" in res.stderr and "Error" not in res.stderr and len(res.stderr.splitlines()) == 1
    assert (elsewhere / "thesis.txt").read_text() == "three years of work"
    assert _snapshot(out) == before and (out / "sub").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "scores"]


@pytest.mark.parametrize("kind", ["symlink to a file", "folder", "fifo"])
def test_a_marker_listing_a_non_regular_file_is_refused_before_anything_goes(tmp_path, kind):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    with output_folder(out, "test") as tmp:
        (tmp / "a.txt").write_text("a")
    victim.write_text("keep")
    if kind == "symlink to a file":
        (out / "b.txt").symlink_to(victim)
    elif kind == "folder":
        (out / "b.txt").mkdir()
    else:
        os.mkfifo(out / "b.txt")
    _list_in_marker(out, "b.txt", _sha(victim))
    with pytest.raises(MindcapError, match=r"lists b\.txt"):
        check_output_folder(out, "test")
    with pytest.raises(MindcapError, match=r"lists b\.txt"), output_folder(out, "test") as tmp:
        (tmp / "c.txt").write_text("c")
    assert victim.read_text() == "keep" and (out / "a.txt").read_text() == "a" and os.path.lexists(out / "b.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "victim.txt"]


def _dangling(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    return link


@pytest.mark.parametrize(
    "args",
    [
        ["score", "--ledger", "{ledger}", "--budgets", "20", "--save", "{out}"],
        ["report", "--ledger", "{ledger}", *REPORT, "--out-dir", "{out}"],
        ["audit", "--ledger", "{ledger}", "--only", "parity", "--out-dir", "{out}"],
        ["ledger", "import", "{tmp}/gen.jsonl", "--out-dir", "{out}"],
        ["extend", "--model", "qwen3-8b", "--lang", "th", "--size", "1", "--out-dir", "{out}"],
        [
            "price",
            "--ledger",
            "{ledger}",
            "--lang",
            "th",
            "--cap",
            "20",
            "--learn-extension",
            "--size",
            "1",
            "--no-premium",
            "--save-extension",
            "{out}",
        ],
    ],
    ids=lambda a: a[0] if a[0] != "ledger" else "ledger import",
)
@pytest.mark.parametrize("where", ["dangling symlink", "under a file", "unwritable"])
def test_an_out_dir_that_cannot_be_a_folder_is_one_line(ledger, tmp_path, qwen, args, where):
    (tmp_path / "gen.jsonl").write_text(json.dumps(make_record(qwen, "#### 18\n")) + "\n")
    if where == "dangling symlink":
        out = _dangling(tmp_path)
    elif where == "under a file":
        (tmp_path / "plain").write_text("a file")
        out = tmp_path / "plain" / "out"
    else:
        out = "/proc/mindcap-tok-test/out"  # /proc refuses new folders, even to root
    before = sorted(p.name for p in tmp_path.iterdir())
    res = run([a.format(ledger=ledger, out=out, tmp=tmp_path) for a in args])
    assert res.exit_code == 2, res.output
    line = res.stderr.strip()
    assert len(line.splitlines()) == 1 and "Error" not in line and str(out) in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == before and not (tmp_path / "nowhere").exists()


def test_new_folder_and_run_store_refuse_a_dangling_symlink(tmp_path):
    from mindcap_tok._io import check_new_folder, new_folder
    from mindcap_tok.roundtrip.store import RunStore

    link = _dangling(tmp_path)
    for check in (check_new_folder, lambda p: RunStore(p, {}, {}), lambda p: check_output_folder(p, "test")):
        with pytest.raises(MindcapError, match=r"symlink to .*nowhere, which does not exist"):
            check(link)
    with pytest.raises(MindcapError, match="does not exist"), new_folder(link, "test") as tmp:
        (tmp / "a").write_text("a")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"]


# -- an interrupted replace is finished or rolled back by the next run ----------------------------------
KILL = """
import os, sys
from pathlib import Path
import mindcap_tok._io as io

step, out = sys.argv[1], Path(sys.argv[2])
real_replace, real_unlink, calls = os.replace, Path.unlink, []

def replace(src, dst):
    calls.append(dst)
    if step == f"replace{len(calls)}":
        os._exit(9)  # as abrupt as SIGKILL: no cleanup runs
    real_replace(src, dst)

def unlink(self, missing_ok=False):
    real_unlink(self, missing_ok=missing_ok)
    if step == "removal" and self.name == "a.txt":
        os._exit(9)

io.os.replace, Path.unlink = replace, unlink
with io.output_folder(out, "test") as tmp:
    (tmp / "b.txt").write_text("new")
    if step == "block":
        os._exit(9)
"""


def _first_output(out):
    with output_folder(out, "test") as tmp:
        (tmp / "sub").mkdir()
        (tmp / "sub" / "a.txt").write_text("old")
        (tmp / "a.txt").write_text("old")


def _killed(tmp_path, step):
    import subprocess
    import sys

    out = tmp_path / "out"
    _first_output(out)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", KILL, step, str(out)], env=env, timeout=60, capture_output=True)
    assert proc.returncode == 9, proc.stderr.decode()
    return out


SRC = __import__("pathlib").Path(__file__).resolve().parents[1] / "src"
STEPS = ["block", "replace1", "replace2", "removal"]


@pytest.mark.parametrize("step", STEPS)
def test_a_rerun_after_a_kill_leaves_one_complete_output(tmp_path, step):
    out = _killed(tmp_path, step)
    assert len(list(tmp_path.iterdir())) > 1  # the kill left something hidden beside out
    with output_folder(out, "test") as tmp:
        (tmp / "c.txt").write_text("newer")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    marker = json.loads((out / OUTPUT_MARKER).read_text())
    assert _snapshot(out).keys() == {"c.txt", OUTPUT_MARKER} and marker["files"] == {"c.txt": _sha(out / "c.txt")}


@pytest.mark.parametrize("step", STEPS)
def test_a_kill_never_loses_the_output(tmp_path, step):
    out = _killed(tmp_path, step)
    with pytest.raises(RuntimeError), output_folder(out, "test") as tmp:  # the next run fails: still one output
        (tmp / "c.txt").write_text("never")
        raise RuntimeError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    expected = {"b.txt": b"new"} if step == "removal" else {"a.txt": b"old", "sub/a.txt": b"old"}
    snap = _snapshot(out)
    assert {k: v for k, v in snap.items() if k != OUTPUT_MARKER} == expected
    marker = json.loads(snap[OUTPUT_MARKER])
    assert marker["files"] == {name: _sha(out / name) for name in expected}


def test_hidden_folders_that_are_not_ours_are_left_alone(tmp_path):
    out = tmp_path / "out"
    _first_output(out)
    (tmp_path / ".out.old").mkdir()
    (tmp_path / ".out.old" / "mine.txt").write_text("mine")
    with pytest.raises(MindcapError, match=r"\.out\.old.*mine\.txt"):
        check_output_folder(out, "test")
    with pytest.raises(MindcapError, match=r"\.out\.old"), output_folder(out, "test"):
        pass
    (tmp_path / ".out.old" / "mine.txt").rename(tmp_path / "mine.txt")
    (tmp_path / ".out.old").rmdir()
    (tmp_path / ".out.x1.tmp").mkdir()  # a staging-like folder without our staging marker
    (tmp_path / ".out.x1.tmp" / "mine.txt").write_text("mine")
    live = tmp_path / ".out.x2.tmp"  # ours, but its process (this one) is alive: maybe still writing
    live.mkdir()
    (live / ".mindcap-tok-staging.json").write_text(json.dumps({"host": os.uname().nodename, "pid": os.getpid()}))
    with output_folder(out, "test") as tmp:
        (tmp / "c.txt").write_text("c")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.x1.tmp", ".out.x2.tmp", "mine.txt", "out"]
    assert (tmp_path / ".out.x1.tmp" / "mine.txt").read_text() == "mine"


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, OSError])
def test_an_error_at_the_publish_puts_the_old_output_back_at_once(tmp_path, monkeypatch, exc):
    out = tmp_path / "out"
    _first_output(out)
    before = _snapshot(out)
    real_replace = os.replace

    def fail_publish(src, dst):
        if Path(dst) == out and Path(src).name.endswith(".tmp"):  # the staging folder renamed into place
            raise exc("at the publish")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", fail_publish)
    with pytest.raises(exc), output_folder(out, "test") as tmp:
        (tmp / "b.txt").write_text("new")
    assert _snapshot(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# -- a new folder (an extension) killed as it publishes: the rerun says whether it is complete ------------------
KILL_NEW = """
import os, sys
from pathlib import Path
import mindcap_tok._io as io

step, out = sys.argv[1], Path(sys.argv[2])
real_replace = os.replace

def replace(src, dst):
    real_replace(src, dst)
    if step == "publish":
        os._exit(9)  # as abrupt as SIGKILL, just after the rename: the staging marker is still inside

io.os.replace = replace
with io.new_folder(out, "mindcap-tok extension") as tmp:
    (tmp / "fold-0").mkdir()
    (tmp / "fold-0" / "tokenizer.json").write_text("{}")
    (tmp / "summary.json").write_text("{}")
    if step == "block":
        os._exit(9)
"""


def test_an_extend_killed_as_it_publishes_is_recognised_by_the_rerun(tmp_path, capsys):
    import subprocess
    import sys

    from mindcap_tok._io import STAGING_MARKER, check_new_folder, new_folder

    out = tmp_path / "th-ext"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", KILL_NEW, "publish", str(out)], env=env, capture_output=True)
    assert proc.returncode == 9, proc.stderr.decode()
    assert (out / STAGING_MARKER).exists()  # killed between the rename and the marker's removal
    with pytest.raises(SystemExit) as exc:
        main(["extend", "--model", "qwen3-8b", "--lang", "th", "--out-dir", str(out)])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert "already exists: a complete output of `mindcap-tok extension`" in err and "its 2 files unchanged" in err
    assert not (out / STAGING_MARKER).exists()  # the leftover of the dead process is gone, the output kept
    assert _snapshot(out).keys() == {"fold-0/tokenizer.json", "summary.json", OUTPUT_MARKER}

    (out / "summary.json").write_text("edited")  # no longer what the run wrote: not called complete
    with pytest.raises(MindcapError, match=r"not whole \(summary.json was changed since\)"):
        check_new_folder(out)

    # killed while writing: the staging folder goes with the rerun, which publishes a complete folder
    other = tmp_path / "sw-ext"
    proc = subprocess.run([sys.executable, "-c", KILL_NEW, "block", str(other)], env=env, capture_output=True)
    assert proc.returncode == 9 and not other.exists() and len(list(tmp_path.glob(".sw-ext.*.tmp"))) == 1
    with new_folder(other, "mindcap-tok extension") as tmp:
        (tmp / "summary.json").write_text("{}")
    assert not list(tmp_path.glob(".sw-ext.*")) and _snapshot(other).keys() == {"summary.json", OUTPUT_MARKER}


def _no_room_for_files_over(limit: int):
    """In the child: files cannot grow past ``limit`` bytes (RLIMIT_FSIZE; the write fails with EFBIG, as a full
    disk fails with ENOSPC, once SIGXFSZ is ignored)."""
    import resource
    import signal

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.parametrize("earlier", [False, True])
def test_a_report_with_no_room_is_one_line_and_publishes_nothing(ledger, tmp_path, earlier):
    import subprocess
    import sys

    out = tmp_path / "rep"
    if earlier:
        assert run(["report", "--ledger", str(ledger), *REPORT, "--out-dir", str(out)]).exit_code == 0
    before = _snapshot(out) if earlier else None
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    args = [sys.executable, "-m", "mindcap_tok", "report", "--ledger", str(ledger), *REPORT, "--out-dir", str(out)]
    proc = subprocess.run(
        args, env=env, capture_output=True, text=True, timeout=300, preexec_fn=_no_room_for_files_over(4096)
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "File too large; nothing was published (its staging folder was removed" in errors[0]
    assert ("the earlier output there is unchanged" if earlier else "nothing is there") in errors[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == (["rep"] if earlier else [])
    if earlier:
        assert _snapshot(out) == before


NO_ROOM_RUN = """
import os, sys
from pathlib import Path
from mindcap_tok.errors import MindcapError
from mindcap_tok.roundtrip.store import HOP_SCHEMA, RunStore, hop_file

def rows(text):
    return [{"model": "m", "text_id": "a", "sequence": "s", "hop": 1, "src_lang": "x", "tgt_lang": "y", "seed": 1,
             "cap": 8, "template_id": "t", "prompt_ids": [1], "output_ids": [2], "text": text,
             "finish_reason": "stop", "capped": False, "empty": False, "generator": "g"}]

store = RunStore(Path(sys.argv[1]), {"texts": "h"}, {})
store.write(hop_file(1), rows("short"), HOP_SCHEMA)
try:
    store.write(hop_file(2), rows(os.urandom(24000).hex()), HOP_SCHEMA)  # random: zstd packs it to about 24 KB
except MindcapError as exc:
    print(exc)
"""


def test_a_run_folder_with_no_room_says_what_stays_committed(tmp_path):
    import subprocess
    import sys

    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-c", NO_ROOM_RUN, str(run_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_no_room_for_files_over(16384),
    )
    assert proc.returncode == 0, proc.stderr
    message = proc.stdout.strip()
    assert message.startswith(f"cannot write {run_dir / 'hops' / 'hop-02.parquet'}: File too large"), message
    assert message.endswith("1 files of the run stay committed, a rerun resumes after them"), message
    assert list(json.loads((run_dir / "_roundtrip.json").read_text("utf-8"))["files"]) == ["hops/hop-01.parquet"]
    assert sorted(p.name for p in (run_dir / "hops").iterdir()) == ["hop-01.parquet"]  # no temporary file left
