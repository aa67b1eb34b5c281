"""A job split into parts (`generate --shard I/N`, SLURM's array variables) and joined by `ledger merge`: the
parts against the documented rank rule computed here with hashlib, the merged ledger against the one-process run
record for record and in `score`, killed parts and merges resumed, and the merge's one-line refusals."""

from __future__ import annotations

import hashlib
import json
import shutil

import pyarrow as pa
import pytest
from click.testing import CliRunner

from conftest import REPO
from generation_job import frame, spec_data
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.generation import JobHooks, Part, parse_part, run_job, with_part
from mindcap_tok.generation.jobs import parse_spec, plan_job
from mindcap_tok.scoring.score import score_ledger
from mindcap_tok.store import Ledger, merge_ledgers


def _groups(plan) -> list[tuple]:
    return [(r.arm, r.lang, r.cap, r.announced, r.item) for s in plan.shards for r in s.requests]


def _rank_rule(groups: list[tuple], index: int, count: int) -> set[tuple]:
    """The documented rule, written out: rank by the first 31 bits of SHA-256("part|arm|lang|cap|announced|item")."""

    def h(g: tuple) -> int:
        digest = hashlib.sha256("|".join(map(str, ("part", *g))).encode()).digest()
        return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF

    ranked = sorted(groups, key=lambda g: (h(g), g))
    n = len(ranked)
    return set(ranked[index * n // count : (index + 1) * n // count])


def test_parts_follow_the_rank_rule_and_cover_the_job_once():
    spec = parse_spec(spec_data("m", design="independent", caps=[6, 10], items=list(range(7))))
    whole = _groups(plan_job(spec))
    assert len(whole) == 2 * 2 * 7  # langs x caps x items, one request each
    seen: list[tuple] = []
    for i in range(3):
        plan = plan_job(with_part(spec, Part(i, 3)))
        mine = _groups(plan)
        assert set(mine) == _rank_rule(whole, i, 3)
        assert len(mine) in (9, 10)  # 28 groups in 3 parts: sizes differ by at most one
        seen += mine
        # seeds are the single run's, request by request
        seeds = {(r.arm, r.lang, r.cap, r.item): r.seed for s in plan_job(spec).shards for r in s.requests}
        assert all(seeds[(r.arm, r.lang, r.cap, r.item)] == r.seed for s in plan.shards for r in s.requests)
    assert sorted(seen) == sorted(whole)
    with pytest.raises(MindcapError, match="at most 28 parts"):
        plan_job(with_part(spec, Part(0, 29)))


def test_determinism_repeats_stay_in_one_part():
    spec = parse_spec(spec_data("m", design="determinism", k=1, caps=[4], long_cap=8, items=[0, 1, 2], repeats=3))
    for i in range(2):
        reqs = [r for s in plan_job(with_part(spec, Part(i, 2))).shards for r in s.requests]
        by_group = {
            (r.lang, r.cap, r.item): sorted(
                x.sample for x in reqs if (x.lang, x.cap, x.item) == (r.lang, r.cap, r.item)
            )
            for r in reqs
        }
        assert all(samples == [0, 1, 2] for samples in by_group.values())


@pytest.mark.parametrize(
    ("text", "message"),
    [("3/3", "I must be 0..2"), ("1/0", "N must be at least 1"), ("a/b", "expected I/N"), ("-1/3", "expected I/N")],
)
def test_bad_part_is_one_line(text, message):
    with pytest.raises(MindcapError, match=message):
        parse_part(text)


def _toml(path, tiny, **kw) -> str:
    data = spec_data(tiny, **kw)
    lines = [f"{k} = {json.dumps(v)}" for k, v in data.items() if not isinstance(v, dict)]
    path.write_text("\n".join([*lines, "[sampling]", "temperature = 0.8", "top_p = 0.95", "top_k = 20", ""]), "utf-8")
    return str(path)


def test_cli_shard_from_slurm_and_bad_values(tmp_path, tiny, monkeypatch):
    job = _toml(tmp_path / "job.toml", tiny)
    runner = CliRunner()
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "3")
    res = runner.invoke(cli, ["generate", job, "--out-dir", str(tmp_path / "a"), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "part 1/3 of the job (from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT" in res.stderr
    assert "2 requests, 4 records" in res.stdout  # 6 request groups (2 langs x 3 items) in 3 parts
    res = runner.invoke(cli, ["generate", job, "--out-dir", str(tmp_path / "a"), "--dry-run", "--shard", "0/1"])
    assert "6 requests, 12 records" in res.stdout and "SLURM" not in res.stderr  # --shard wins
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    res = runner.invoke(cli, ["generate", job, "--out-dir", str(tmp_path / "b"), "--backend", "transformers"])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        "error: SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT 3/3: I must be 0..2 (0-based, as SLURM's --array=0-2)"
    ]
    res = runner.invoke(cli, ["generate", job, "--out-dir", str(tmp_path / "b"), "--shard", "2-3"])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "expected I/N" in res.stderr
    assert not (tmp_path / "b").exists()


def _run_parts(spec, tmp_path, backend, config, count=3) -> list:
    outs = []
    for i in range(count):
        out = tmp_path / f"part{i}"
        run_job(with_part(spec, Part(i, count)), out, backend=backend, data_dir=config.data_dir.value)
        outs.append(out)
    return outs


def test_parts_merged_equal_the_single_run(tmp_path, tiny, backend, config):
    spec = parse_spec(spec_data(tiny))
    run_job(spec, tmp_path / "whole", backend=backend, data_dir=config.data_dir.value)
    parts = _run_parts(spec, tmp_path, backend, config)
    assert [len(Ledger(p)) for p in parts] == [4, 4, 4]  # 6 requests x k=2 in 3 parts
    done = merge_ledgers(parts, tmp_path / "merged")
    assert (done.read, done.added, done.skipped, done.missing) == (12, 12, 0, {"t": []})
    merged, whole = frame(tmp_path / "merged"), frame(tmp_path / "whole")
    keep = ("lang", "item", "sample", "seed", "output_ids", "text", "finish_reason", "prompt_ids")
    assert [{k: r[k] for k in keep} for r in merged] == [{k: r[k] for k in keep} for r in whole]
    assert merged == whole
    assert Ledger(tmp_path / "merged").verify().ok
    job = "_jobs/t.json"
    assert (tmp_path / "merged" / job).read_text() == (tmp_path / "whole" / job).read_text()
    tok = backend.tok.resolved
    scores = [score_ledger(Ledger(tmp_path / p).read(), tok, budgets=[4, 12]).by_record for p in ("merged", "whole")]
    cols = ["lang", "item", "sample"]
    a, b = (s.sort_values(cols).reset_index(drop=True) for s in scores)
    assert a.equals(b)
    # merging again (or one more copy of a part) adds nothing: identical duplicates are skipped
    again = merge_ledgers(parts[:1], tmp_path / "merged")
    assert (again.added, again.skipped, again.parts, again.missing) == (0, 4, {"t": [0]}, {"t": [1, 2]})
    assert frame(tmp_path / "merged") == whole


def test_killed_part_and_killed_merge_resume(tmp_path, tiny, backend, config):
    spec = parse_spec(spec_data(tiny, items=[0, 1, 2, 3, 4, 5], shard_size=1))
    part = with_part(spec, Part(0, 2))

    class Crash(Exception):
        pass

    def crash(done):
        if done.index == 1:
            raise Crash

    with pytest.raises(Crash):
        run_job(part, tmp_path / "p0", backend=backend, data_dir=config.data_dir.value, hooks=JobHooks(on_shard=crash))
    assert len(Ledger(tmp_path / "p0")) == 2 * 2  # two shards of one request x k=2
    resumed = run_job(part, tmp_path / "p0", backend=backend, data_dir=config.data_dir.value)
    assert (resumed.written, resumed.skipped) == (4, 2)  # 12 request groups, 6 in this part
    with pytest.raises(MindcapError, match="holds part 0/2 of job 't', not part 1/2"):
        run_job(with_part(spec, Part(1, 2)), tmp_path / "p0", backend=backend, data_dir=config.data_dir.value)
    run_job(with_part(spec, Part(1, 2)), tmp_path / "p1", backend=backend, data_dir=config.data_dir.value)
    run_job(spec, tmp_path / "whole", backend=backend, data_dir=config.data_dir.value)

    def stop(done, total):
        if done == 1:
            raise Crash

    with pytest.raises(Crash):
        merge_ledgers([tmp_path / "p0", tmp_path / "p1"], tmp_path / "m", on_progress=stop)
    assert 0 < len(Ledger(tmp_path / "m")) < 24
    merge_ledgers([tmp_path / "p0", tmp_path / "p1"], tmp_path / "m")
    assert frame(tmp_path / "m") == frame(tmp_path / "whole")
    assert Ledger(tmp_path / "m").verify().ok


def test_merge_refusals_are_one_line_and_write_nothing(tmp_path, tiny, backend, config):
    spec = parse_spec(spec_data(tiny, langs=["deu_Latn"], items=[0, 1, 2]))
    a, b = _run_parts(spec, tmp_path, backend, config, count=2)
    other = tmp_path / "other"
    run_job(
        parse_spec(spec_data(tiny, langs=["deu_Latn"], items=[0, 1, 2], seed=8)),
        other,
        backend=backend,
        data_dir=config.data_dir.value,
    )
    # a copy of part 1 whose first record has another seed: a conflicting duplicate
    bad = tmp_path / "bad"
    table = Ledger(b).read()
    seeds = table.column("seed").to_pylist()
    field = table.schema.field("seed")
    table = table.set_column(
        table.schema.get_field_index("seed"), field, pa.array([seeds[0] + 1, *seeds[1:]], field.type)
    )
    Ledger(bad).append(table, Ledger(b).tokenizers())
    shutil.copytree(b / "_jobs", bad / "_jobs")
    # part 1's records under the same tokenizer name from other tokenizer files
    retok = tmp_path / "retok"
    entry = {"sha256": "0" * 64, "vocab_size": Ledger(b).tokenizers()["tiny-qwen3"]["vocab_size"]}
    Ledger(retok).append(Ledger(b).read(), {"tiny-qwen3": entry})
    shutil.copytree(b / "_jobs", retok / "_jobs")
    # part 2 of another split of the same job
    third = tmp_path / "third"
    run_job(with_part(spec, Part(2, 3)), third, backend=backend, data_dir=config.data_dir.value)
    inputs_ = (a, b, other, bad, retok, third)
    before = {p: sorted(q.name for q in p.rglob("*")) for p in inputs_}
    runner = CliRunner()
    cases = [
        ([a, other], "with other settings than ledger"),
        ([a, b, bad], "with different content (seed differs)"),
        ([a, retok], "merge joins ledgers of one tokenizer"),
        ([a, third], "holds part 2/3 of job t, ledger"),
        ([a, a], "given twice"),
    ]
    for inputs, message in cases:
        res = runner.invoke(cli, ["ledger", "merge", *map(str, inputs), "--out-dir", str(tmp_path / "M")])
        assert res.exit_code == 2, res.output
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], res.stderr
        assert not (tmp_path / "M").exists()
    assert before == {p: sorted(q.name for q in p.rglob("*")) for p in inputs_}


@pytest.mark.slow
def test_three_cli_processes_merged_equal_one_process(tmp_path, tiny, backend, config):
    import os
    import signal
    import subprocess
    import sys
    import time

    job = _toml(tmp_path / "job.toml", tiny, items=list(range(6)), shard_size=1)
    base = [sys.executable, "-m", "mindcap_tok", "generate", job, "--backend", "transformers", "--out-dir"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    slurm = {**env, "SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3"}
    procs = [
        subprocess.Popen([*base, str(tmp_path / "p0"), "--shard", "0/3"], cwd=REPO, env=env, stderr=subprocess.PIPE),
        subprocess.Popen([*base, str(tmp_path / "p1"), "--shard", "1/3"], cwd=REPO, env=env, stderr=subprocess.PIPE),
        subprocess.Popen([*base, str(tmp_path / "p2")], cwd=REPO, env=slurm, stderr=subprocess.PIPE),
    ]
    # kill part 0 once it has committed some shards, then rerun it
    deadline = time.monotonic() + 180
    p0 = Ledger(tmp_path / "p0")
    while (not p0.exists() or len(p0) < 2) and time.monotonic() < deadline:
        assert procs[0].poll() is None, procs[0].stderr.read().decode()
        time.sleep(0.02)
    os.kill(procs[0].pid, signal.SIGKILL)
    procs[0].wait()
    killed_at = len(p0)
    assert 2 <= killed_at < 8, "the kill must land midway (4 shards of 2 records)"
    for p in procs[1:]:
        assert p.wait() == 0, p.stderr.read().decode()
    assert "from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT" in procs[2].stderr.read().decode()
    rerun = subprocess.run(
        [*base, str(tmp_path / "p0"), "--shard", "0/3"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr
    assert f"{killed_at // 2} of 4 shards were already done" in rerun.stderr
    run_job(
        parse_spec(spec_data(tiny, items=list(range(6)), shard_size=1)),
        tmp_path / "whole",
        backend=backend,
        data_dir=config.data_dir.value,
    )
    runner = CliRunner()
    merged = runner.invoke(
        cli, ["ledger", "merge", *(str(tmp_path / f"p{i}") for i in range(3)), "--out-dir", str(tmp_path / "m")]
    )
    assert merged.exit_code == 0 and "merged 24 of 24 records from 3 ledgers" in merged.stderr, merged.output
    assert frame(tmp_path / "m") == frame(tmp_path / "whole")
    assert Ledger(tmp_path / "m").verify().ok
    score = ["score", "--tokenizer", str(tiny), "--budgets", "4,12", "--format", "csv", "--ledger"]
    outs = [runner.invoke(cli, [*score, str(tmp_path / d)]) for d in ("m", "whole")]
    assert outs[0].exit_code == 0, outs[0].output
    assert outs[0].stdout == outs[1].stdout and outs[0].stdout.count("\n") > 1
