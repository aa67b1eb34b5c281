"""Generation jobs: spec expansion (hand-worked counts), the real transformers backend end to end on a tiny
random Qwen3, seeded reproducibility, kill-and-resume, forcing, announcement and the CLI."""

from __future__ import annotations

import json
import random
from fractions import Fraction

import pytest

from conftest import REPO
from generation_job import frame, spec_data
from mindcap_tok.cli.main import main
from mindcap_tok.data.flores import load_flores
from mindcap_tok.errors import MindcapError
from mindcap_tok.generation.generate import JobHooks, dry_run, run_job
from mindcap_tok.generation.jobs import caps_for, load_spec, parse_spec, plan_job
from mindcap_tok.scoring.score import score_ledger
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.load import load_tokenizer

try:
    import torch
except ImportError:  # the spec tests need no torch; every test of the tiny model does (the tiny fixture skips)
    torch = None


# -- the spec ---------------------------------------------------------------------------------------------------


def test_flores_premiums_are_measured_with_the_jobs_tokenizer():
    spec = parse_spec(
        {
            "model": "org/model",
            "tokenizer": "qwen3-8b",
            "arms": ["native"],
            "langs": ["de", "th"],
            "items": [0],
            "k": 1,
            "design": "independent",
            "caps": [64, 1000],
            "premiums": "flores",
        }
    )
    tok = load_tokenizer("qwen3-8b").tokenizer

    def total(lang):  # counted here line by line, apart from the premium code
        return sum(len(tok.encode(line, add_special_tokens=False).ids) for line in load_flores(lang, "devtest"))

    eng = total("eng_Latn")
    for lang in ("deu_Latn", "tha_Thai"):
        tokens = total(lang)
        scaled = {c for c in caps_for(spec, "native", lang=lang) if c not in (64, 1000)}
        assert scaled == {tokens * 64 // eng, tokens * 1000 // eng}
    stored = json.loads(json.dumps(spec.as_dict()))["premiums"]
    assert Fraction(stored["tha_Thai"]) == Fraction(total("tha_Thai"), eng)
    with pytest.raises(MindcapError, match='"flores"'):
        parse_spec(
            {
                "model": "m",
                "arms": ["native"],
                "langs": ["de"],
                "design": "independent",
                "caps": [64],
                "premiums": "wiki",
            }
        )


def test_flores_premiums_read_the_given_data_dir(tmp_path):
    # --data-dir must reach the premium measurement: an empty folder has no FLORES, and the error says where it looked
    data = {
        "model": "org/model",
        "tokenizer": "qwen3-8b",
        "arms": ["native"],
        "langs": ["de"],
        "items": [0],
        "k": 1,
        "design": "independent",
        "caps": [64],
        "premiums": "flores",
    }
    with pytest.raises(MindcapError, match=f"FLORES-200 folder not found: {tmp_path}"):
        parse_spec(data, data_dir=tmp_path)


def test_independent_plan_counts_by_hand(tmp_path):
    spec = parse_spec(
        {
            "model": "org/model",
            "arms": ["native", "translate-act"],
            "langs": ["de", "th"],
            "items": list(range(10)),
            "k": 2,
            "design": "independent",
            "caps": [64, 128],
            "premiums": {"de": 1.56, "th": 2.55},
            "shard_size": 4,
        }
    )
    plan = plan_job(spec)
    # native de: 64, 128, floor(1.56*64)=99, floor(1.56*128)=199; native th: 64, 128, 163, 326; translate-act: 64, 128
    caps = {(r.arm, r.lang) for s in plan.shards for r in s.requests}
    assert len(caps) == 4
    by_cell = {}
    for s in plan.shards:
        for r in s.requests:
            by_cell.setdefault((r.arm, r.lang), set()).add(r.cap)
    assert by_cell[("native", "deu_Latn")] == {64, 99, 128, 199}
    assert by_cell[("native", "tha_Thai")] == {64, 128, 163, 326}
    assert by_cell[("translate-act", "tha_Thai")] == {64, 128}
    # 12 (cell, cap) populations x ceil(10 / 4) = 3 shards; no shard mixes caps
    assert len(plan.shards) == 36
    assert all(len({r.cap for r in s.requests}) == 1 for s in plan.shards)
    assert plan.requests == 120 and plan.records == 240
    assert plan.worst_case_tokens == 2 * 10 * (490 + 681 + 192 + 192)
    # seeds vary by cap (and by item), never repeat
    seeds = [r.seed for s in plan.shards for r in s.requests]
    assert len(set(seeds)) == len(seeds)


def test_example_independent_job_matches_the_paper_shard_count():
    # paper §3: 540,000 decodes in 270 cap-partitioned shards for two models, i.e. 270,000 and 135 shards per model:
    # 4 arms x 3 langs x 9 caps + 3 premium-scaled NATIVE grids of 9 = 135 populations x 250 items x k=8
    plan = plan_job(load_spec(REPO / "examples" / "jobs" / "independent.toml"))
    assert (len(plan.shards), plan.records) == (135, 270_000)


def test_spec_errors():
    base = {"model": "org/m", "arms": ["native"], "langs": ["de"], "design": "replay"}
    with pytest.raises(MindcapError, match="unknown key"):
        parse_spec({**base, "kk": 1})
    with pytest.raises(MindcapError, match="one cap"):
        parse_spec({**base, "caps": [1, 2]})
    with pytest.raises(MindcapError, match="announcement design needs"):
        parse_spec({**base, "design": "announcement"})
    with pytest.raises(MindcapError, match="has no kor_Hang"):
        parse_spec({**base, "langs": ["kor_Hang"]})
    with pytest.raises(MindcapError, match="independent design only"):
        parse_spec({**base, "premiums": {"de": 1.5}})
    sample = parse_spec({**base, "items": {"sample": 5, "seed": 3}})
    assert sample.items == tuple(sorted(random.Random(3).sample(range(250), 5)))
    with pytest.raises(MindcapError, match=r"forcing\.enabled: must be of type bool"):
        parse_spec({**base, "forcing": {"enabled": "false"}})  # a truthy string would switch forcing on
    with pytest.raises(MindcapError, match=r"sampling\.top_k: must be of type int"):
        parse_spec({**base, "sampling": {"top_k": 20.5}})
    assert parse_spec({**base, "sampling": {"temperature": 1}}).sampling.temperature == 1  # an int is a float
    with pytest.raises(MindcapError, match="names a file"):
        parse_spec({**base, "name": "../elsewhere"})
    with pytest.raises(MindcapError, match=r"announce: must be a table"):
        parse_spec({**base, "announce": [128]})
    with pytest.raises(MindcapError, match=r"premiums\.de: must be of type float \(finite\), got '1\.5'"):
        parse_spec({**base, "design": "independent", "caps": [64], "premiums": {"de": "1.5"}})


# -- the transformers backend, end to end -----------------------------------------------------------------------


def test_replay_end_to_end_matches_direct_generate(tmp_path, tiny, backend, config):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = parse_spec(spec_data(tiny))
    res = run_job(spec, tmp_path / "led", backend=backend, data_dir=config.data_dir.value)
    assert (res.written, res.skipped, res.records) == (4, 0, 12)  # 2 langs x ceil(3 / 2) shards; 2 x 3 x k=2
    led = Ledger(tmp_path / "led")
    assert led.verify().ok
    rows = frame(tmp_path / "led")
    assert len(rows) == 12
    # the prompt is the chat template with thinking disabled, and the ids are its encoding
    hf_tok = AutoTokenizer.from_pretrained(tiny)
    row = rows[0]
    assert row["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert row["prompt_ids"] == hf_tok(row["prompt"], add_special_tokens=False)["input_ids"]
    # a transformers generate call made here with the record's seed gives the stored ids
    model = AutoModelForCausalLM.from_pretrained(tiny).eval()
    ids = torch.tensor([row["prompt_ids"]])
    torch.manual_seed(row["seed"])
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=True,
        temperature=0.8,
        top_p=0.95,
        top_k=20,
        max_new_tokens=12,
        num_return_sequences=2,
        eos_token_id=[hf_tok.eos_token_id],
        pad_token_id=hf_tok.pad_token_id,
    )
    im_end = hf_tok.eos_token_id
    for sample in (0, 1):
        direct = out[sample, ids.shape[1] :].tolist()
        if im_end in direct:
            direct = direct[: direct.index(im_end) + 1]
        stored = next(
            r for r in rows if r["lang"] == row["lang"] and r["item"] == row["item"] and r["sample"] == sample
        )
        assert stored["output_ids"] == direct
        assert stored["finish_reason"] == ("stop" if direct[-1] == im_end else "length")
    assert all(r["n_tokens"] <= 12 and r["design"] == "replay" and not r["forcing"] for r in rows)
    assert {r["gold"] for r in rows if r["item"] == 0} == {18}  # MGSM item 0: Janet's ducks, 18 dollars
    scores = score_ledger(led.read(), backend.tok.resolved, budgets=[4, 12])
    assert len(scores.by_record) == 12
    job = json.loads((tmp_path / "led" / "_jobs" / "t.json").read_text())
    assert len(job["requests"]) == 6 and {r["seed"] for r in job["requests"]} == {r["seed"] for r in rows}


def test_seeded_rerun_reproduces_and_skips(tmp_path, tiny, backend, config, monkeypatch):
    spec = parse_spec(spec_data(tiny, langs=["swh_Latn"]))
    run_job(spec, tmp_path / "a", backend=backend, data_dir=config.data_dir.value)
    with monkeypatch.context() as m:  # nothing left to do: the engine must not even start
        m.setattr("mindcap_tok.generation.generate.load_backend", lambda *a, **k: pytest.fail("engine started"))
        again = run_job(spec, tmp_path / "a", backend="transformers", data_dir=config.data_dir.value)
    assert (again.written, again.skipped, len(Ledger(tmp_path / "a"))) == (0, 2, 6)
    job_file = tmp_path / "a" / "_jobs" / f"{spec.name}.json"
    job_file.write_text("{trunc", encoding="utf-8")
    with pytest.raises(MindcapError, match="is unreadable"):
        run_job(spec, tmp_path / "a", backend=backend, data_dir=config.data_dir.value)
    run_job(spec, tmp_path / "b", backend=backend, data_dir=config.data_dir.value)
    assert frame(tmp_path / "a") == frame(tmp_path / "b")
    other = run_job(
        parse_spec(spec_data(tiny, langs=["swh_Latn"], seed=8)),
        tmp_path / "c",
        backend=backend,
        data_dir=config.data_dir.value,
    )
    assert other.records == 6
    assert [r["output_ids"] for r in frame(tmp_path / "c")] != [r["output_ids"] for r in frame(tmp_path / "a")]


def test_kill_midway_and_resume_equals_uninterrupted(tmp_path, tiny, backend, config):
    spec = parse_spec(spec_data(tiny, design="independent", caps=[6, 10], items=[0, 1, 2, 3]))
    assert len(plan_job(spec).shards) == 8  # 2 langs x 2 caps x ceil(4 / 2)

    class Crash(Exception):
        pass

    def crash_after_three(done):
        if done.index == 2:
            raise Crash

    with pytest.raises(Crash):
        run_job(
            spec,
            tmp_path / "killed",
            backend=backend,
            data_dir=config.data_dir.value,
            hooks=JobHooks(on_shard=crash_after_three),
        )
    assert len(Ledger(tmp_path / "killed")) == 3 * 2 * 2  # three shards of 2 requests x k=2
    resumed = run_job(spec, tmp_path / "killed", backend=backend, data_dir=config.data_dir.value)
    assert (resumed.written, resumed.skipped) == (5, 3)
    run_job(spec, tmp_path / "whole", backend=backend, data_dir=config.data_dir.value)
    assert frame(tmp_path / "killed") == frame(tmp_path / "whole")
    assert Ledger(tmp_path / "killed").verify().ok
    # seeds vary by cap: the two caps of one item do not share a seed
    rows = frame(tmp_path / "whole")
    assert {r["seed"] for r in rows if r["item"] == 0 and r["lang"] == "deu_Latn" and r["cap"] == 6}.isdisjoint(
        {r["seed"] for r in rows if r["item"] == 0 and r["lang"] == "deu_Latn" and r["cap"] == 10}
    )


def test_forcing_appends_delimiter_and_finishes_line(tmp_path, tiny, backend, config):
    spec = parse_spec(
        spec_data(tiny, langs=["deu_Latn"], items=[0], caps=[6], forcing={"enabled": True, "max_tokens": 3})
    )
    run_job(spec, tmp_path / "f", backend=backend, data_dir=config.data_dir.value)
    rows = frame(tmp_path / "f")
    forced = backend.tok.encode("\n####")
    newlines = set(backend.tok.newline_ids())
    assert all(r["forcing"] for r in rows)
    capped = [r for r in rows if r["finish_reason"] == "length"]
    assert capped, "a random 512-token model almost never stops within 6 tokens"
    # the record says it was forced exactly when the forcing text follows the decode (cut ones always are)
    assert all(r["forced"] == (r["output_ids"][6 : 6 + len(forced)] == forced) for r in rows)
    assert all(r["forced"] for r in capped)
    for r in capped:
        ids = r["output_ids"]
        assert ids[6 : 6 + len(forced)] == forced
        tail = ids[6 + len(forced) :]
        # greedy continuation: the model's argmax after the forced prefix, stopped at a newline token or 3 tokens
        model = backend.model
        seq = r["prompt_ids"] + ids[: 6 + len(forced)]
        expect = []
        for _ in range(3):
            with torch.no_grad():
                nxt = int(model(torch.tensor([seq])).logits[0, -1].argmax())
            expect.append(nxt)
            seq.append(nxt)
            if nxt in newlines or nxt in backend.eos:
                break
        assert tail == expect


def test_announcement_design_records_the_budget(tmp_path, tiny, backend, config):
    spec = parse_spec(
        spec_data(
            tiny,
            langs=["tha_Thai"],
            items=[0],
            design="announcement",
            caps=[5],
            announce={"budgets": [128, 2048], "style": "tag"},
        )
    )
    res = run_job(spec, tmp_path / "a", backend=backend, data_dir=config.data_dir.value)
    assert res.records == 4
    rows = frame(tmp_path / "a")
    assert {r["announced"] for r in rows} == {128, 2048} and {r["cap"] for r in rows} == {5}
    for r in rows:
        assert f"TOKEN_BUDGET: {r['announced']}" in r["prompt"]
        assert r["announce_style"] == "tag" and r["template_id"].endswith(":tag")
    assert {r["seed"] for r in rows if r["announced"] == 128}.isdisjoint(
        {r["seed"] for r in rows if r["announced"] == 2048}
    )


# -- the CLI -----------------------------------------------------------------------------------------------------


def toml_job(path, tiny) -> str:
    path.write_text(
        f'name = "cli"\nmodel = "{tiny}"\nmodel_name = "tiny-qwen3"\narms = ["native", "pivot"]\nlangs = ["de"]\n'
        'items = [0, 1, 2]\nk = 2\ndesign = "independent"\ncaps = [4, 8]\nshard_size = 2\n[premiums]\nde = 1.5\n',
        "utf-8",
    )
    return str(path)


def test_cli_dry_run_and_generate(tmp_path, tiny, capsys):
    job = toml_job(tmp_path / "job.toml", tiny)
    # native: caps 4, 8, floor(1.5*4)=6, floor(1.5*8)=12; pivot: 4, 8 -> 6 populations x ceil(3 / 2) = 12 shards
    with pytest.raises(SystemExit) as exc:
        main(["generate", job, "--out-dir", str(tmp_path / "led"), "--dry-run"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "18 requests, 36 records, 12 shards (0 already done)" in out
    assert f"worst case {2 * 3 * (4 + 8 + 6 + 12 + 4 + 8)} output tokens" in out
    assert load_spec(job).premiums == {"deu_Latn": 1.5}
    with pytest.raises(SystemExit) as exc:
        main(["generate", job, "--out-dir", str(tmp_path / "led"), "--backend", "transformers"])
    assert exc.value.code == 0
    assert "wrote 12 shards (36 records" in capsys.readouterr().err
    assert dry_run(job, tmp_path / "led")["shards_done"] == 12


def test_a_failed_start_does_not_lock_the_job_spec(tmp_path, tiny, backend, config):
    # vLLM is not installed here, so the first run fails to start and leaves nothing behind (no ledger folder, no
    # job file); a changed spec then runs, and a job file refuses a changed spec once records are stored
    out = tmp_path / "ledger"
    with pytest.raises(MindcapError):
        run_job(
            parse_spec(spec_data(tiny, engine={"max_model_len": 512})),
            out,
            backend="vllm",
            data_dir=config.data_dir.value,
        )
    assert not out.exists()
    spec = parse_spec(spec_data(tiny, items=[0], langs=["deu_Latn"]))
    assert run_job(spec, out, backend=backend, data_dir=config.data_dir.value).records == 2
    with pytest.raises(MindcapError, match="holds a different spec"):
        run_job(parse_spec(spec_data(tiny, items=[0], langs=["deu_Latn"], seed=9)), out, backend=backend)


def test_missing_vllm_names_the_extra(tmp_path, tiny, monkeypatch):
    import importlib.util

    from mindcap_tok.generation.backends import load_backend

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    with pytest.raises(MindcapError, match=r"mindcap-tok\[gen\]"):
        load_backend("vllm", str(tiny), tokenizer_name="t")


def test_transformers_backend_takes_top_k_minus_one_as_no_top_k(tiny):
    """The spec's one "off" spelling, top_k = -1, samples from the whole distribution: the same ids as transformers'
    own generate with top_k = 0 (its "off") under the same seed."""
    from mindcap_tok.generation.backends import GenRequest, load_backend

    b = load_backend("transformers", str(tiny), tokenizer_name="t", engine={})
    prompt = tuple(b.tok.hf("hello", add_special_tokens=False)["input_ids"])
    req = GenRequest(prompt, n=2, max_tokens=8, seed=7, temperature=1.0, top_p=1.0, top_k=-1)
    (got,) = b.generate([req])
    ids = torch.tensor([prompt])
    torch.manual_seed(7)
    out = b.model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_new_tokens=8,
        num_return_sequences=2,
        eos_token_id=list(b.eos),
        pad_token_id=b.pad,
    )
    for sample, c in zip(out[:, ids.shape[1] :].tolist(), got, strict=True):
        stop = next((i for i, t in enumerate(sample) if t in b.eos), None)
        assert c.ids == tuple(sample if stop is None else sample[: stop + 1])


def test_transformers_backend_ignores_vllm_engine_options(tiny):
    from mindcap_tok.generation.backends import load_backend

    b = load_backend(
        "transformers",
        str(tiny),
        tokenizer_name="t",
        engine={"max_model_len": 4096, "tensor_parallel_size": 1, "dtype": "bfloat16"},
    )
    assert b.model.dtype == torch.bfloat16
    newlines = b.tok.newline_ids()
    assert newlines and all("\n" in b.tok.hf.decode([i]) for i in newlines)


@pytest.mark.slow
def test_sigkill_midway_then_rerun_equals_uninterrupted(tmp_path, tiny, backend, config):
    import os
    import signal
    import subprocess
    import sys
    import time

    spec = spec_data(tiny, langs=["deu_Latn"], items=list(range(12)), shard_size=1, caps=[24])
    job = tmp_path / "job.toml"
    lines = [f"{k} = {json.dumps(v)}" for k, v in spec.items() if not isinstance(v, dict)]
    job.write_text("\n".join([*lines, "[sampling]", "temperature = 0.8", "top_p = 0.95", "top_k = 20", ""]), "utf-8")
    cmd = [sys.executable, "-m", "mindcap_tok", "generate", str(job), "--out-dir", str(tmp_path / "k"), "--backend"]
    proc = subprocess.Popen([*cmd, "transformers"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while (not Ledger(tmp_path / "k").exists() or len(Ledger(tmp_path / "k")) < 6) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = len(Ledger(tmp_path / "k"))
    assert 6 <= killed_at < 24, "the kill must land midway (12 shards of 2 records)"
    rerun = subprocess.run([*cmd, "transformers"], cwd=REPO, capture_output=True, text=True, check=True)
    assert f"{killed_at // 2} of 12 shards were already done" in rerun.stderr  # status: stderr
    run_job(parse_spec(spec), tmp_path / "whole", backend=backend, data_dir=config.data_dir.value)
    assert frame(tmp_path / "k") == frame(tmp_path / "whole")
    assert Ledger(tmp_path / "k").verify().ok


class Scripted:
    """The tiny model's backend whose sampled decodes are given (``samples``, each request's); its forcing
    continuations (greedy, one sample) are the model's own."""

    def __init__(self, backend, samples) -> None:
        self.backend, self.samples = backend, samples

    def __getattr__(self, name: str):
        return getattr(self.backend, name)

    def generate(self, requests):
        forcing = [r for r in requests if r.temperature == 0.0]
        assert not forcing or len(forcing) == len(requests)
        return self.backend.generate(requests) if forcing else [list(self.samples) for _ in requests]


def test_forcing_unanswered_completed_traces(tmp_path, tiny, backend, config):
    from mindcap_tok.generation.backends import Completion

    tok = backend.tok
    im_end = tok.hf.eos_token_id
    unanswered = Completion((*tok.encode("Step 1: 4"), im_end), "stop")
    answered = Completion((*tok.encode("Step 1: 4\n#### 4"), im_end), "stop")

    def greedy(prefix: list[int]) -> list[int]:
        seq, out = list(prefix), []
        for _ in range(3):
            with torch.no_grad():
                nxt = int(backend.model(torch.tensor([seq])).logits[0, -1].argmax())
            out.append(nxt)
            seq.append(nxt)
            if nxt in set(tok.newline_ids()) or nxt in backend.eos:
                break
        return out

    for flag in (False, True):
        forcing = {"enabled": True, "max_tokens": 3, "unanswered": flag}
        spec = parse_spec(spec_data(tiny, langs=["deu_Latn"], items=[0], forcing=forcing))
        ledger = tmp_path / f"unanswered-{flag}"
        run_job(spec, ledger, backend=Scripted(backend, [unanswered, answered]), data_dir=config.data_dir.value)
        first, second = frame(ledger)
        assert second["output_ids"] == list(answered.ids) and second["forced"] is False  # a strict answer line
        assert first["forced"] == flag
        if not flag:
            assert first["output_ids"] == list(unanswered.ids)
            continue
        forced = tok.encode("\n####")
        body = list(unanswered.ids[:-1])  # end-of-turn token dropped
        assert first["finish_reason"] == "stop"
        assert first["output_ids"] == body + forced + greedy(first["prompt_ids"] + body + forced)
