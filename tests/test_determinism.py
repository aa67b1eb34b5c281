"""The determinism design and audit: spec expansion (hand-worked counts and shared seeds), the audit's arithmetic on
hand-built records (Wilson intervals checked against statsmodels), and the transformers backend end to end on the
tiny random Qwen3 (seeded CPU decoding: both shares are 1)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from click.testing import CliRunner

from generation_job import frame, spec_data
from mindcap_tok.audits import REGISTRY, run_audits
from mindcap_tok.audits.determinism import determinism_audit, first_divergence, wilson_interval
from mindcap_tok.audits.suite import select_audits
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.generation.generate import dry_run, run_job
from mindcap_tok.generation.jobs import parse_spec, plan_job
from mindcap_tok.store.ledger import Ledger

statsmodels_proportion = pytest.importorskip("statsmodels.stats.proportion")


def det_spec(**kw) -> dict:
    data = {
        "model": "org/model",
        "arms": ["native"],
        "langs": ["de", "th"],
        "items": [0, 1, 2],
        "design": "determinism",
        "caps": [8, 4],
        "long_cap": 16,
        "repeats": 3,
        "shard_size": 7,
        "seed": 5,
    }
    data.update(kw)
    return data


# -- the spec -------------------------------------------------------------------------------------------------------


def test_determinism_plan_counts_and_shared_seeds():
    spec = parse_spec(det_spec())
    assert (spec.k, spec.repeats, spec.long_cap, spec.records_per_key) == (1, 3, 16, 3)
    plan = plan_job(spec)
    # 2 langs x 3 caps (4, 8, 16) x 3 items x 3 repeats = 54 requests of one sample each
    assert (plan.requests, plan.records) == (54, 54)
    # shard_size 7 requests -> 7 // 3 = 2 items a shard: ceil(3 / 2) = 2 shards per (lang, cap): 12 shards
    assert len(plan.shards) == 12
    assert plan.worst_case_tokens == 2 * 3 * 3 * (4 + 8 + 16)
    assert dry_run(spec) == {**plan.summary()}
    for shard in plan.shards:  # no item's repeats split over two shards
        items = [r.item for r in shard.requests]
        assert all(items.count(i) == 3 for i in set(items))
    by_item: dict[tuple, set] = {}
    for r in (r for s in plan.shards for r in s.requests):
        by_item.setdefault((r.lang, r.item), set()).add(r.seed)
        assert r.sample in (0, 1, 2)
    # one seed per (lang, item), shared by every cap and repeat; items differ
    assert all(len(seeds) == 1 for seeds in by_item.values())
    assert len({next(iter(s)) for s in by_item.values()}) == 6
    assert {r.cap for s in plan.shards for r in s.requests} == {4, 8, 16}
    stored = json.loads(json.dumps(spec.as_dict()))
    assert (stored["repeats"], stored["long_cap"]) == (3, 16)
    # the other designs' stored specs are unchanged (no repeats / long_cap keys), so their jobs still resume
    other = parse_spec({k: v for k, v in det_spec(design="independent").items() if k not in ("repeats", "long_cap")})
    assert "repeats" not in other.as_dict() and "long_cap" not in other.as_dict()
    assert other.records_per_key == other.k == 8


def test_determinism_spec_errors():
    base = det_spec()
    cases = [
        ({"k": 2}, "one sample per request"),
        ({"forcing": {"enabled": True}}, "no forcing"),
        ({"caps": [4, 16]}, "below long_cap = 16"),
        ({"caps": [4, 4]}, "a cap twice"),
        ({"repeats": 1}, r"repeats: must be an integer in 2\.\."),
        ({"repeats": True}, "repeats: must be of type int"),
        ({"long_cap": 16.0}, "long_cap: must be of type int"),
    ]
    for change, message in cases:
        with pytest.raises(MindcapError, match=message) as err:
            parse_spec({**base, **change}, source="job.toml")
        assert "\n" not in str(err.value) and "job.toml" in str(err.value)
    with pytest.raises(MindcapError, match="needs long_cap"):
        parse_spec({k: v for k, v in base.items() if k != "long_cap"})
    with pytest.raises(MindcapError, match="apply to the determinism design only"):
        parse_spec({**base, "design": "independent"})
    assert parse_spec({k: v for k, v in base.items() if k != "repeats"}).repeats == 2  # the default


# -- the audit's arithmetic on hand-built records -------------------------------------------------------------------


def records(rows: list[tuple], design: str = "determinism") -> pa.Table:
    """(lang, cap, item, sample, ids) rows as the suite reads them."""
    return pa.table(
        {
            "model": ["m"] * len(rows),
            "arm": ["native"] * len(rows),
            "lang": [r[0] for r in rows],
            "design": [design] * len(rows),
            "cap": [r[1] for r in rows],
            "announced": pa.nulls(len(rows), pa.int64()),
            "announce_style": ["none"] * len(rows),
            "forcing": [False] * len(rows),
            "item": [r[2] for r in rows],
            "sample": [r[3] for r in rows],
            "seed": [7] * len(rows),
            "output_ids": pa.array([r[4] for r in rows], pa.list_(pa.int32())),
        }
    )


LONG = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]


def hand_built() -> pa.Table:
    rows = []
    # lang A, item 0: repeats at cap 10 identical; at cap 4 the second repeat diverges at position 2;
    #                 the cap-4 decode equals LONG[:4]  -> prefix equal
    rows += [("deu_Latn", 10, 0, s, LONG) for s in range(3)]
    rows += [
        ("deu_Latn", 4, 0, 0, [1, 2, 3, 4]),
        ("deu_Latn", 4, 0, 1, [1, 2, 9, 9]),
        ("deu_Latn", 4, 0, 2, [1, 2, 3, 4]),
    ]
    # lang A, item 1: repeats at cap 10: the third is a strict prefix (stopped early) -> diverges at 6;
    #                 cap 4 identical repeats, but the cap-4 decode differs from LONG[:4] at position 0
    rows += [("deu_Latn", 10, 1, 0, LONG), ("deu_Latn", 10, 1, 1, LONG), ("deu_Latn", 10, 1, 2, LONG[:6])]
    rows += [("deu_Latn", 4, 1, s, [0, 2, 3, 4]) for s in range(3)]
    # lang A, item 2: everything identical; the long decode stopped after 3 tokens, so LONG3[:4] is all of it
    rows += [("deu_Latn", 10, 2, s, [5, 6, 7]) for s in range(3)] + [("deu_Latn", 4, 2, s, [5, 6, 7]) for s in range(3)]
    # lang B, item 0: a single repeat (no group), the cap-4 decode stops early inside the long one -> diverges at 3
    rows += [("tha_Thai", 10, 0, 0, LONG), ("tha_Thai", 4, 0, 0, [1, 2, 3])]
    return records(rows)


def test_audit_counts_shares_and_wilson_intervals():
    res = determinism_audit(hand_built())
    assert res.status == "ok"
    rep = res.tables["repeats"].set_index("lang")
    pre = res.tables["prefix"].set_index("lang")
    # deu: 6 repeat groups (3 items x 2 caps), 4 identical; tha: none
    assert (rep.at["deu_Latn", "n"], rep.at["deu_Latn", "identical"], rep.at["deu_Latn", "diverged"]) == (6, 4, 2)
    assert "tha_Thai" not in rep.index
    assert sorted([rep.at["deu_Latn", "diverge_p50"]]) == [4.0]  # positions {2, 6}: median 4
    assert rep.at["deu_Latn", "diverge_p10"] == pytest.approx(2.4) and rep.at["deu_Latn", "diverge_p90"] == 5.6
    # prefix: deu 3 pairs, 2 equal (items 0 and 2), item 1 diverges at 0; tha 1 pair, diverges at 3
    assert (pre.at["deu_Latn", "n"], pre.at["deu_Latn", "identical"], pre.at["deu_Latn", "diverge_p50"]) == (3, 2, 0)
    assert (pre.at["tha_Thai", "n"], pre.at["tha_Thai", "identical"], pre.at["tha_Thai", "diverge_p50"]) == (1, 0, 3)
    for table, lang, x, n in ((rep, "deu_Latn", 4, 6), (pre, "deu_Latn", 2, 3), (pre, "tha_Thai", 0, 1)):
        low, high = statsmodels_proportion.proportion_confint(x, n, alpha=0.05, method="wilson")
        assert table.at[lang, "share"] == pytest.approx(x / n)
        assert (table.at[lang, "ci_low"], table.at[lang, "ci_high"]) == (pytest.approx(low), pytest.approx(high))
    by_cap = res.tables["repeats_by_cap"].set_index("cap")
    assert (by_cap.at[4, "identical"], by_cap.at[4, "n"], by_cap.at[10, "identical"]) == (2, 3, 2)
    assert set(res.tables["prefix_by_cap"]["long_cap"]) == {10}
    s = res.summary
    assert (s["repeat_groups"], s["repeat_identical"], s["prefix_pairs"], s["prefix_identical"]) == (6, 4, 4, 2)
    assert s["prefix_ci"] == pytest.approx(list(statsmodels_proportion.proportion_confint(2, 4, method="wilson")))
    assert json.loads(json.dumps(res.as_dict()))["summary"]["repeat_share"] == pytest.approx(4 / 6)


def test_wilson_against_statsmodels_and_first_divergence():
    # the paper's repeat figure: 23 of 50 identical
    for x, n, level in ((23, 50, 0.95), (0, 7, 0.95), (7, 7, 0.9), (3, 40, 0.99), (1, 1, 0.95)):
        want = statsmodels_proportion.proportion_confint(x, n, alpha=1 - level, method="wilson")
        assert wilson_interval(x, n, level=level) == pytest.approx(want)
    assert wilson_interval(0, 0) == (None, None)
    with pytest.raises(MindcapError):
        wilson_interval(3, 2)
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    assert first_divergence([], [4]) == 0


def test_audit_skips_without_determinism_records():
    res = determinism_audit(records([("deu_Latn", 10, 0, 0, LONG)], design="replay"))
    assert res.status == "skipped" and 'design = "determinism"' in res.reason
    suite = run_audits(records([("deu_Latn", 10, 0, 0, LONG)], design="replay"), only=["determinism"])
    assert suite.results[0].status == "skipped"
    assert "determinism" in REGISTRY and "determinism" not in select_audits(None)  # opt-in: only when named


# -- the transformers backend end to end ----------------------------------------------------------------------------


def test_transformers_determinism_job_and_audit(tmp_path, tiny, backend, config):
    data = spec_data(
        tiny,
        design="determinism",
        caps=[4, 8],
        long_cap=16,
        repeats=3,
        k=1,
        items=[0, 1],
        langs=["deu_Latn"],
        shard_size=4,
    )
    spec = parse_spec(data)
    res = run_job(spec, tmp_path / "led", backend=backend, data_dir=config.data_dir.value)
    # 3 caps x 2 items x 3 repeats; 4 // 3 = 1 item a shard: 3 caps x 2 shards
    assert (res.records, res.written) == (18, 6)
    led = Ledger(tmp_path / "led")
    assert led.verify().ok
    rows = frame(tmp_path / "led")
    assert {r["design"] for r in rows} == {"determinism"} and {r["sample"] for r in rows} == {0, 1, 2}
    assert len({r["seed"] for r in rows if r["item"] == 0}) == 1
    again = run_job(spec, tmp_path / "led", backend=backend, data_dir=config.data_dir.value)  # resumable: nothing left
    assert (again.written, again.skipped) == (0, 6)
    suite = run_audits(led, only=["determinism"])
    det = suite.results[0]
    assert det.status == "ok"
    s = det.summary
    # seeded CPU decoding in transformers is deterministic: every group and pair identical
    assert (s["repeat_groups"], s["repeat_identical"], s["repeat_share"]) == (6, 6, 1.0)
    assert (s["prefix_pairs"], s["prefix_identical"], s["prefix_share"]) == (4, 4, 1.0)
    assert s["repeat_ci"] == pytest.approx(list(statsmodels_proportion.proportion_confint(6, 6, method="wilson")))
    # and through the CLI
    out = tmp_path / "audit"
    args = ["audit", "--ledger", str(tmp_path / "led"), "--out-dir", str(out), "--only", "determinism"]
    cli_res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert cli_res.exit_code == 0, cli_res.output
    assert "determinism: ok" in cli_res.output
    report = json.loads((out / "audit.json").read_text())
    assert report["audits"][0]["name"] == "determinism" and report["audits"][0]["summary"]["prefix_share"] == 1.0
