"""Ledger integrity: exact record types, conflicting re-imports, checked reads, locks, safe manifests, import errors."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from ledger_factory import make_cell, make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.ingest.jsonl import import_jsonl
from mindcap_tok.store.ledger import MANIFEST, Ledger
from mindcap_tok.store.schema import RecordError, validate_records

REPO = Path(__file__).resolve().parents[1]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg, msg
    return msg


@pytest.fixture(scope="module")
def cell(qwen):
    return make_cell(qwen, n_items=3, n_samples=2)


# -- 1. import strictness --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("item", 1.5, r"item = 1\.5 is not a valid int64 \(an integer is required, not a float\)"),
        ("item", 3.0, r"item = 3\.0 is not a valid int64"),
        ("item", True, r"item = True is not a valid int64 \(an integer is required, not a bool\)"),
        ("sample", False, r"sample = False is not a valid int64"),
        ("seed", 7.25, r"seed = 7\.25 is not a valid int64"),
        ("cap", 4096.0, r"cap = 4096\.0 is not a valid int64"),
        ("gold", 18.5, r"gold = 18\.5 is not a valid int64"),
        ("gold", True, r"gold = True is not a valid int64"),
        ("announced", 256.0, r"announced = 256\.0 is not a valid int64"),
        ("forcing", 1, r"forcing = 1 is not a valid bool"),
        ("forcing", "false", r"forcing = 'false' is not a valid bool"),
        ("retokenized", 0, r"retokenized = 0 is not a valid bool"),
    ],
)
def test_dict_records_need_exact_types(qwen, cell, field, value, message):
    records = [dict(r) for r in cell]
    records[3] = {**records[3], field: value, **({"announce_style": "tag"} if field == "announced" else {})}
    with pytest.raises(RecordError, match=rf"^record 3 \(.*\): {message}") as exc:
        validate_records(records)
    assert exc.value.index == 3


@pytest.mark.parametrize(
    ("field", "ids", "message"),
    [
        ("output_ids", [5, None, 7], r"output_ids\[1\] is null"),
        ("output_ids", [5, 6.5], r"output_ids\[1\] = 6\.5 is not an integer token id"),
        ("output_ids", [5, 6.0], r"output_ids\[1\] = 6\.0 is not an integer token id"),
        ("prompt_ids", [True, 3], r"prompt_ids\[0\] = True is not an integer token id"),
        ("prompt_ids", "12 13", r"prompt_ids is a str, expected a list of integer token ids"),
    ],
)
def test_dict_ids_must_be_integers(qwen, cell, field, ids, message):
    records = [dict(r) for r in cell]
    records[2] = {**records[2], field: ids}
    with pytest.raises(RecordError, match=rf"^record 2 \(.*item=1 sample=0\): {message}"):
        validate_records(records)


def test_exact_types_still_accept_what_is_valid(qwen, cell):
    records = [dict(r) for r in cell]
    records[0] = {**records[0], "announced": 256, "announce_style": "tag", "forcing": True, "retokenized": False}
    records[1] = {**records[1], "announced": None}
    table = validate_records(records)
    assert table.column("announced").to_pylist()[:2] == [256, None]
    assert table.column("forcing").to_pylist()[:2] == [True, False]
    assert table.column("output_ids").to_pylist() == [r["output_ids"] for r in cell]


def test_arrow_and_pandas_inputs_reject_floats_and_null_ids(cell):
    frame = pd.DataFrame(cell)
    with pytest.raises(RecordError, match=r"record 1 \(.*\): item = 1\.5 is not an integer"):
        validate_records(pa.Table.from_pandas(frame.assign(item=[0, 1.5, 1, 1, 2, 2])))
    ids = [list(x) for x in frame["output_ids"]]
    ids[4] = [*ids[4][:2], None, *ids[4][2:]]
    table = pa.Table.from_pandas(frame.drop(columns=["output_ids"])).append_column(
        "output_ids", pa.array(ids, pa.list_(pa.int64()))
    )
    with pytest.raises(RecordError, match=r"record 4 \(.*item=2 sample=0\): output_ids holds a null") as exc:
        validate_records(table)
    assert exc.value.index == 4
    with pytest.raises(RecordError, match=r"record 4 .*output_ids holds a null"):
        validate_records(frame.assign(output_ids=ids))


def test_import_names_the_line_of_a_float_or_null(tmp_path, qwen, cell):
    rows = [dict(r) for r in cell]
    rows[4]["gold"] = 18.5
    with pytest.raises(MindcapError, match=r"gen\.jsonl:5: record 4 \(.*\): gold = 18\.5 is not a valid int64"):
        import_jsonl(_jsonl(tmp_path / "gen.jsonl", rows), tmp_path / "L", tokenizer=qwen)
    rows = [dict(r) for r in cell]
    rows[1]["retokenized"] = "yes"
    with pytest.raises(MindcapError, match=r"gen\.jsonl:2: retokenized = 'yes' is not a valid bool"):
        import_jsonl(_jsonl(tmp_path / "gen.jsonl", rows), tmp_path / "L", tokenizer=qwen)
    rows = [dict(r) for r in cell]
    rows[0]["gold"] = "5,600"  # MGSM style: still parsed
    result = import_jsonl(_jsonl(tmp_path / "gen.jsonl", rows), tmp_path / "L", tokenizer=qwen)
    assert result.added == 6 and Ledger(tmp_path / "L").read(columns=["gold"]).column("gold").to_pylist()[0] == 5600


# -- 2. duplicates across batches, changed re-imports -----------------------------------------------------------
def test_duplicate_key_in_a_later_batch_names_both_lines(tmp_path, qwen, cell):
    rows = [dict(r) for r in cell]
    rows.append({**cell[1], "text": "something else"})  # line 7 repeats the key of line 2
    with pytest.raises(
        MindcapError, match=r"gen\.jsonl:7: record 0 \(.*item=0 sample=1\) has the same key as the record at line 2"
    ):
        import_jsonl(_jsonl(tmp_path / "gen.jsonl", rows), tmp_path / "L", tokenizer=qwen, batch_records=3)


def test_reimport_of_changed_records_is_an_error_and_identical_ones_are_skipped(tmp_path, qwen, cell):
    root = tmp_path / "L"
    src = _jsonl(tmp_path / "gen.jsonl", cell)
    import_jsonl(src, root, tokenizer=qwen)
    (shard,) = Ledger(root).shards()
    again = import_jsonl(src, root, tokenizer=qwen)  # the resume path: identical records are skipped
    assert (again.read, again.added, again.skipped) == (6, 0, 6)
    changed = [dict(r) for r in cell]
    changed[5] = {**changed[5], "gold": 999}
    changed[4] = {**changed[4], "text": changed[4]["text"] + "!"}
    res = CliRunner().invoke(
        cli,
        [
            "ledger",
            "import",
            str(_jsonl(tmp_path / "new.jsonl", changed)),
            "--out-dir",
            str(root),
            "--tokenizer",
            "qwen3-8b",
        ],
    )
    assert res.exit_code == 2, res.output
    line = res.output.strip().splitlines()[-1]
    assert "new.jsonl:5: record 4 (" in line and "item=2 sample=0" in line
    assert f"already stored in {root / shard.path} with different content (text differs)" in line
    assert len(Ledger(root)) == 6 and Ledger(root).verify().ok


def test_append_compares_every_stored_column(tmp_path, qwen, cell):
    led = Ledger(tmp_path / "L")
    (shard,) = led.append(cell, qwen)
    assert led.append(cell, qwen, skip_existing=True) == []
    for field, value in (("seed", 5), ("generator", "other"), ("prompt_ids", [1, 2]), ("template_id", "t2")):
        changed = [dict(r) for r in cell]
        changed[2] = {**changed[2], field: value}
        with pytest.raises(
            RecordError, match=rf"record 2 .* in .*{shard.path} with different content \({field} differs\)"
        ):
            led.append(changed, qwen, skip_existing=True)
    assert len(led) == 6


# -- 3. readers check shards ------------------------------------------------------------------------------------
def test_read_checks_the_shard_hash_and_verify_false_skips_it(tmp_path, qwen, cell):
    root = tmp_path / "L"
    (shard,) = Ledger(root).append(cell, qwen)
    path = root / shard.path
    table = pq.read_table(path)
    ids = table.column("output_ids").to_pylist()
    ids[0] = [ids[0][0] + 1, *ids[0][1:]]  # one token id changed, still a valid shard
    pq.write_table(
        table.set_column(
            table.schema.get_field_index("output_ids"),
            "output_ids",
            pa.array(ids, table.schema.field("output_ids").type),
        ),
        path,
        compression="zstd",
    )
    with pytest.raises(MindcapError, match=r"cannot read ledger shard .*part-000000.*mindcap-tok ledger verify") as exc:
        Ledger(root).read()
    assert str(path) in _one_line(exc)
    unchecked = Ledger(root, verify=False).read()
    assert unchecked.column("output_ids").to_pylist()[0][0] == ids[0][0]
    info = CliRunner().invoke(cli, ["ledger", "info", str(root)])
    assert info.exit_code == 2 and "mindcap-tok ledger verify" in info.output and len(info.output.splitlines()) == 1
    fast = CliRunner().invoke(cli, ["ledger", "info", str(root), "--no-verify", "--format", "json"])
    assert fast.exit_code == 0 and json.loads(fast.output)[0]["records"] == 6
    with pytest.raises(TypeError):
        Ledger(root, False)  # keyword only


def test_read_flipped_byte_and_truncation(tmp_path, qwen, cell):
    root = tmp_path / "L"
    (shard,) = Ledger(root).append(cell, qwen)
    path = root / shard.path
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(MindcapError, match="content differs from the manifest's SHA-256"):
        Ledger(root).read(columns=["item"])
    path.write_bytes(bytes(data[:-7]))
    with pytest.raises(MindcapError, match=rf"{len(data) - 7} bytes, the manifest says {len(data)}"):
        Ledger(root).info()


# -- 4. verify while an import runs -----------------------------------------------------------------------------
def test_verify_during_concurrent_appends_sees_no_false_problems(tmp_path, qwen):
    root = tmp_path / "L"
    led = Ledger(root)
    led.append([make_record(qwen, "#### 1", item=0)], qwen)
    stop = time.monotonic() + 4
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            item = 1
            while time.monotonic() < stop:
                records = [
                    make_record(qwen, f"#### {i}", item=i, lang=lang)
                    for i in range(item, item + 3)
                    for lang in ("tha_Thai", "deu_Latn")
                ]
                Ledger(root).append(records, qwen)
                item += 3
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    checks = 0
    try:
        while thread.is_alive():
            report = Ledger(root).verify()
            assert report.ok, report.problems
            assert Ledger(root).read(columns=["item"]).num_rows >= report.rows
            checks += 1
    finally:
        thread.join()
    assert not errors and checks >= 5
    assert len(Ledger(root).shards()) > 10


def test_read_only_ledger_is_still_readable(tmp_path, qwen, cell):
    root = tmp_path / "L"
    Ledger(root).append(cell, qwen)
    (root / ".lock").unlink()  # e.g. a copy made without the lock file
    assert Ledger(root).verify().ok and Ledger(root).read().num_rows == 6
    assert not (root / ".lock").exists()  # readers create nothing
    Ledger(tmp_path / "M").append(cell, qwen)
    modes = {}
    for path in [tmp_path / "M", *(tmp_path / "M").rglob("*")]:
        modes[path] = path.stat().st_mode
        path.chmod(stat.S_IMODE(modes[path]) & ~0o222)
    try:
        assert Ledger(tmp_path / "M").verify().ok and Ledger(tmp_path / "M").info()["records"].sum() == 6
    finally:
        for path, mode in modes.items():
            path.chmod(stat.S_IMODE(mode))


def test_readers_without_a_usable_lock_still_read(tmp_path, qwen, cell, monkeypatch):
    root = tmp_path / "L"
    Ledger(root).append(cell, qwen)
    import fcntl

    def no_flock(fd, op):  # e.g. a network file system without flock
        raise OSError(37, "No locks available")

    with monkeypatch.context() as m:
        m.setattr(fcntl, "flock", no_flock)
        assert Ledger(root).verify().ok and Ledger(root).read().num_rows == 6
    real_open = os.open

    def refuse_lock(path, flags, *args):  # a lock file this user may not open
        if str(path).endswith(".lock"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    with monkeypatch.context() as m:
        m.setattr(os, "open", refuse_lock)
        assert Ledger(root).verify().ok and Ledger(root).read().num_rows == 6


# -- 6. manifest paths and entries ------------------------------------------------------------------------------
def _edit_manifest(root: Path, edit) -> None:
    manifest = json.loads((root / MANIFEST).read_text())
    edit(manifest["shards"][0])
    (root / MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("../../../../etc/passwd", "is not a normalised path inside the ledger"),
        ("/etc/passwd", "is absolute"),
        ("model=qwen3-8b/../../outside.parquet", "is not a normalised path inside the ledger"),
        ("model=qwen3-8b//x.parquet", "is not a normalised path inside the ledger"),
        ("./x.parquet", "is not a normalised path inside the ledger"),
        ("_manifest.json", r"is not named like a shard \(\*\.parquet\)"),
        ("model=qwen3-8b/.x.parquet", r"is not named like a shard"),
    ],
)
def test_manifest_paths_must_stay_inside(tmp_path, qwen, cell, path, problem):
    root = tmp_path / "L"
    Ledger(root).append(cell, qwen)
    _edit_manifest(root, lambda s: s.update(path=path))
    report = Ledger(root).verify()
    assert any(p.startswith(f"{path!r}: shard path ") and "not opened" in p for p in report.problems), report.problems
    with pytest.raises(MindcapError, match=rf"ledger manifest .*{MANIFEST}: shard path '.*' {problem}") as exc:
        Ledger(root).read()
    _one_line(exc)
    res = CliRunner().invoke(cli, ["ledger", "info", str(root)])
    assert res.exit_code == 2 and "shard path" in res.output and "root:" not in res.output


def test_symlinked_shard_outside_the_ledger_is_not_read(tmp_path, qwen, cell):
    root = tmp_path / "L"
    (shard,) = Ledger(root).append(cell, qwen)
    outside = tmp_path / "elsewhere.parquet"
    (root / shard.path).rename(outside)
    (root / shard.path).symlink_to(outside)
    assert any("resolves outside the ledger" in p for p in Ledger(root).verify().problems)
    with pytest.raises(MindcapError, match="resolves outside the ledger"):
        Ledger(root).read()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.update(colour="red"), r"shard entry 0 has unknown key\(s\) colour"),
        (lambda s: s.pop("sha256"), "shard entry 0 lacks sha256"),
        (lambda s: s.update(rows="6"), r"shard entry 0: rows = '6' is not a non-negative integer"),
        (lambda s: s.update(rows=True), r"shard entry 0: rows = True is not a non-negative integer"),
        (lambda s: s.update(bytes=-1), r"shard entry 0: bytes = -1 is not a non-negative integer"),
        (lambda s: s.update(path=7), r"shard entry 0: path = 7 is not a string"),
        (lambda s: s.update(sha256="xyz"), "shard entry 0: sha256 is not 64 lowercase hex digits"),
    ],
)
def test_malformed_shard_entries_are_one_line_errors(tmp_path, qwen, cell, edit, message):
    root = tmp_path / "L"
    Ledger(root).append(cell, qwen)
    _edit_manifest(root, edit)
    for action in (lambda: Ledger(root).verify(), lambda: Ledger(root).read(), lambda: Ledger(root).append(cell, qwen)):
        with pytest.raises(MindcapError, match=rf"^ledger manifest {root / MANIFEST}: {message}") as exc:
            action()
        _one_line(exc)
    res = CliRunner().invoke(cli, ["ledger", "verify", str(root)])
    assert res.exit_code == 2 and res.output.startswith("error: ledger manifest") and len(res.output.splitlines()) == 1


def test_manifest_with_wrong_top_level_types(tmp_path, qwen, cell):
    root = tmp_path / "L"
    Ledger(root).append(cell, qwen)
    manifest = json.loads((root / MANIFEST).read_text())
    (root / MANIFEST).write_text(json.dumps({**manifest, "shards": {"a": 1}}))
    with pytest.raises(MindcapError, match="shards is not a list"):
        Ledger(root).verify()


def _nested_gold(qwen) -> bytes:
    """A record whose gold is a list nested 900 deep (JSON parses it; the message must stay short)."""
    rec = json.dumps({**make_record(qwen, "#### 1", item=7), "gold": 0})
    return rec.replace('"gold": 0', '"gold": ' + "[" * 900 + "]" * 900).encode() + b"\n"


# -- 7. import messages -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tail", "message"),
    [
        (
            b'{"model": "qwen3-8b", "text": "\xff"}\n',
            r"bad\.jsonl:3: not valid UTF-8 \(invalid start byte at byte 32\)",
        ),
        ('{"model": "qwen3-8b", "text": "ไทย'.encode()[:-1], r"bad\.jsonl:3: not valid UTF-8 \(unexpected end of data"),
        (b'{"model": "qwen3-8b", "text": "\\ud800"}\n', r"bad\.jsonl:3: 'text' holds a lone surrogate escape"),
        (b'{"model": "qwen3-8b", "\\udfff": 1}\n', r"bad\.jsonl:3: '\\udfff' holds a lone surrogate escape"),
        (b"[" * 200_000 + b"]" * 200_000 + b"\n", r"bad\.jsonl:3: JSON nested too deeply"),
        (_nested_gold, r"bad\.jsonl:3: record 0 \(.*\): gold = \[\[\[\.\.\.\]\]\] is not a valid int64"),
    ],
)
def test_unreadable_lines_are_one_line_errors(tmp_path, qwen, cell, tail, message):
    src = tmp_path / "bad.jsonl"
    tail = tail(qwen) if callable(tail) else tail
    src.write_bytes(_jsonl(tmp_path / "ok.jsonl", cell[:2]).read_bytes() + tail)
    with pytest.raises(MindcapError, match=message) as exc:
        import_jsonl(src, tmp_path / "L", tokenizer=qwen, batch_records=1)
    msg = _one_line(exc)
    assert msg.endswith(
        f"; 2 records before it were committed to {tmp_path / 'L'} (rerun after fixing the line to continue)"
    )
    res = CliRunner().invoke(
        cli, ["ledger", "import", str(src), "--out-dir", str(tmp_path / "M"), "--tokenizer", "qwen3-8b"]
    )
    assert res.exit_code == 2 and len(res.output.splitlines()) == 1 and "bad.jsonl:3: " in res.output


def test_failure_says_how_many_records_were_committed(tmp_path, qwen):
    rows = [make_record(qwen, f"#### {i}", item=i) for i in range(8)]
    rows[6]["arm"] = "english"
    root = tmp_path / "L"
    with pytest.raises(MindcapError) as exc:
        import_jsonl(_jsonl(tmp_path / "gen.jsonl", rows), root, tokenizer=qwen, batch_records=3)
    assert _one_line(exc) == (
        f"{tmp_path / 'gen.jsonl'}:7: record 0 (model=qwen3-8b arm=english lang=tha_Thai cap=4096 item=6 sample=0): "
        f"arm = 'english'; use one of native, translate-act, pivot, code-switched; "
        f"6 records before it were committed to {root} (rerun after fixing the line to continue)"
    )
    assert len(Ledger(root)) == 6
    with pytest.raises(MindcapError) as first:
        import_jsonl(_jsonl(tmp_path / "one.jsonl", rows[6:7]), tmp_path / "M", tokenizer=qwen)
    assert "committed" not in str(first.value)


def test_import_reads_standard_input_in_one_pass(tmp_path, qwen, cell):
    data = _jsonl(tmp_path / "gen.jsonl", cell).read_text(encoding="utf-8")
    res = CliRunner().invoke(
        cli, ["ledger", "import", "-", "--out-dir", str(tmp_path / "A"), "--tokenizer", "qwen3-8b"], input=data
    )
    assert res.exit_code == 0, res.output
    assert "imported 6 of 6 records" in res.output and len(Ledger(tmp_path / "A")) == 6
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mindcap_tok",
            "ledger",
            "import",
            "/dev/stdin",
            "--out-dir",
            str(tmp_path / "B"),
            "--tokenizer",
            "qwen3-8b",
        ],
        input=data.encode(),
        capture_output=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"imported 6 of 6 records" in proc.stderr and len(Ledger(tmp_path / "B")) == 6


# -- 8. file modes ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_store_files_follow_the_umask(tmp_path, qwen, cell, umask):
    old = os.umask(umask)
    try:
        Ledger(tmp_path / "L").append(cell, qwen)
    finally:
        os.umask(old)
    root = tmp_path / "L"
    for path in [root, *root.rglob("*")]:
        if path.name == MANIFEST:
            continue  # written by _io.atomic_write_text (fixed separately)
        want = (0o777 if path.is_dir() else 0o666) & ~umask
        assert stat.S_IMODE(path.stat().st_mode) == want, path


# -- 5. verify never aborts -------------------------------------------------------------------------------------
#: Runs ``Ledger(DIR).verify()`` in forked children (two at a time) that print the problems and exit the normal
#: way, through interpreter finalization, where the abort happened (it showed in ~1.5% of such runs before the
#: fix, more often than through the CLI); prints one JSON line per run: dir, exit code (or -signal), output.
_FORK_VERIFY = r"""
import json, os, sys, tempfile
from mindcap_tok.errors import MindcapError
from mindcap_tok.store.ledger import Ledger
dirs, runs = sys.argv[2:], int(sys.argv[1])
out_dir = tempfile.mkdtemp()
running = {}
def reap():
    pid, status = os.wait()
    d, path = running.pop(pid)
    code = os.waitstatus_to_exitcode(status)
    print(json.dumps({"dir": d, "rc": code, "output": open(path, encoding="utf-8").read()}), flush=True)
for i in range(runs):
    if len(running) >= 2:
        reap()
    d, path = dirs[i % len(dirs)], os.path.join(out_dir, f"{i}.txt")
    pid = os.fork()
    if pid == 0:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        try:
            problems = Ledger(d).verify().problems
        except MindcapError as exc:
            print(f"error: {exc}")
            sys.exit(2)
        print(json.dumps(problems))
        sys.exit(1 if problems else 0)  # a normal interpreter shutdown
    running[pid] = (d, path)
while running:
    reap()
"""


def _damaged_ledgers(root: Path, qwen) -> dict[Path, tuple[int, list[str]]]:
    """Damaged copies of a 3-shard ledger -> (exit code, the problems expected: each starts with one text)."""
    import shutil

    base = root / "base"
    led = Ledger(base)
    for arm, lang in (("native", "tha_Thai"), ("pivot", "tha_Thai"), ("native", "deu_Latn")):
        led.append(make_cell(qwen, n_items=20, n_samples=3, arm=arm, lang=lang), qwen)
    shards = [s.path for s in led.shards()]
    cases: dict[Path, tuple[int, list[str]]] = {}

    def case(name: str, rc: int, expect: list[str]) -> Path:
        d = root / name
        shutil.copytree(base, d)
        cases[d] = (rc, expect)
        return d

    d = case("truncated", 1, [f"{shards[0]}: 500 bytes, manifest says"])
    (d / shards[0]).write_bytes((d / shards[0]).read_bytes()[:500])
    d = case("flipped", 1, [f"{shards[1]}: content hash differs"])
    data = bytearray((d / shards[1]).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (d / shards[1]).write_bytes(bytes(data))
    d = case("garbage", 1, ["x.parquet: shard not listed", "model=qwen3-8b/junk.parquet: shard not listed"])
    (d / "model=qwen3-8b" / "junk.parquet").write_bytes(os.urandom(3000))
    (d / "x.parquet").write_bytes(b"PAR1garbagePAR1")
    d = case("missing", 1, [f"{shards[2]}: missing"])
    (d / shards[2]).unlink()
    d = case("bad-manifest", 2, ["error: ledger manifest"])
    (d / MANIFEST).write_text("{not json")
    d = case(
        "traversal", 1, ["'../../../../etc/passwd': shard path is not a normalised", f"{shards[0]}: shard not listed"]
    )
    _edit_manifest(d, lambda s: s.update(path="../../../../etc/passwd"))
    # damage the manifest agrees with: every shard must be parsed from its (corrupt) bytes
    d = case("corrupt-parquet", 1, [f"{p}: not readable as Parquet" for p in shards])
    manifest = json.loads((d / MANIFEST).read_text())
    for k, entry in enumerate(manifest["shards"]):
        data = bytearray((d / entry["path"]).read_bytes())
        if k == 1:  # 64 bytes cut from the middle: the footer's offsets point past the end
            data = data[: len(data) // 2] + data[len(data) // 2 + 64 :]
        else:  # the closing magic bytes, the footer
            data[len(data) - (1 if k == 0 else 20)] ^= 0xFF
        (d / entry["path"]).write_bytes(bytes(data))
        entry.update(bytes=len(data), sha256=hashlib.sha256(bytes(data)).hexdigest())
    (d / MANIFEST).write_text(json.dumps(manifest))
    return cases


@pytest.mark.slow
def test_verify_on_damaged_ledgers_never_aborts(tmp_path, qwen):
    cases = _damaged_ledgers(tmp_path, qwen)
    runs = 200
    proc = subprocess.run(
        [sys.executable, "-c", _FORK_VERIFY, str(runs), *map(str, cases)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == runs
    aborted = [r for r in results if r["rc"] < 0 or r["rc"] == 134]
    assert not aborted, f"{len(aborted)} of {runs} runs aborted: {aborted[0]}"
    for r in results:
        rc, expect = cases[Path(r["dir"])]
        assert r["rc"] == rc, r
        if rc == 2:
            assert r["output"].startswith(expect[0]) and len(r["output"].splitlines()) == 1, r
            continue
        problems = json.loads(r["output"])
        assert len(problems) == len(expect) and all(any(p.startswith(e) for p in problems) for e in expect), r
