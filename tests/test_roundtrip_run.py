"""Round-trip runs on the tiny random Qwen3 (transformers backend): hop records and chaining, capped and empty
hops, judge rounds with retries, resume after an interruption, and the CLI."""

from __future__ import annotations

import json
import re

import pytest

from mindcap_tok.cli.main import main
from mindcap_tok.errors import MindcapError
from mindcap_tok.generation.backends import Completion, GenRequest
from mindcap_tok.roundtrip import parse_spec, plan_roundtrip, roundtrip_metrics, run_roundtrip
from mindcap_tok.roundtrip.prompts import translation_prompt
from mindcap_tok.roundtrip.spec import hop_seed, judge_seed
from mindcap_tok.roundtrip.store import RunStore

torch = pytest.importorskip("torch", reason="the transformers backend needs the torch extra")


GOOD = json.dumps(
    {
        "score": 88,
        "classification": "7-good",
        "issues": [{"severity": "minor", "description": "a"}, {"severity": "major", "description": "b"}],
    }
)


class FakeJudge:
    """A judge whose reply is chosen per request by ``reply(request name)``; replies are real token ids."""

    name, version = "fake-judge", "1"

    def __init__(self, tok, reply) -> None:
        self.tok, self.reply, self.seen = tok, reply, []

    def generate(self, requests: list[GenRequest]) -> list[list[Completion]]:
        self.seen += requests
        return [[Completion(tuple(self.tok.encode(self.reply(r.name))), "stop")] for r in requests]


class EmptyOn:
    """Delegates to a backend but returns an empty decode (EOS only) for requests whose name contains ``marker``."""

    def __init__(self, inner, marker: str) -> None:
        self.inner, self.marker, self.tok = inner, marker, inner.tok
        self.name, self.version = inner.name, inner.version

    def generate(self, requests):
        out = self.inner.generate(requests)
        eos = self.inner.eos[0]
        return [
            [Completion((eos,), "stop")] if self.marker in r.name else o for r, o in zip(requests, out, strict=True)
        ]


def judge_reply(name: str) -> str:
    # text "a": valid at once; "b": garbage first, fenced JSON on the retry; "c": never parseable
    if "/a/" in name:
        return GOOD
    if "/b/" in name:
        return "```json\n" + GOOD + "\n```" if "attempt 1" in name else "I think it is fine."
    return "no idea"


@pytest.fixture
def texts_file(tmp_path):
    path = tmp_path / "texts.jsonl"
    rows = [
        {"id": "a", "text": "Janet has 16 eggs.", "category": "stem"},
        {"id": "b", "text": "Solve the problem step by step.", "category": "informal"},
        {"id": "c", "text": "The answer is 9.", "category": "stem"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def make_spec(tiny, texts_file, **kw):
    data = {
        "model": str(tiny),
        "model_name": "tiny-qwen3",
        "texts": str(texts_file),
        "sequences": ["en>de>th>en", "en>sw>en"],
        "max_tokens": 6,
        "seed": 3,
        "sampling": {"temperature": 0.8, "top_p": 0.95, "top_k": 20},
        "judge": {"retries": 1},
    }
    data.update(kw)
    return parse_spec(data)


def test_hops_chain_outputs_and_records(tmp_path, tiny, backend, texts_file):
    spec = make_spec(tiny, texts_file)
    judge = FakeJudge(backend.tok, judge_reply)
    result = run_roundtrip(spec, tmp_path / "run", backend, judge)
    assert result.written == [
        "hops/hop-01.parquet",
        "hops/hop-02.parquet",
        "hops/hop-03.parquet",
        "judge/round-00.parquet",
        "judge/round-01.parquet",
    ]
    store = RunStore(tmp_path / "run", spec.identity(), spec.as_dict())
    hops = store.read_all("hops/")
    by_chain: dict = {}
    for row in hops:
        by_chain.setdefault((row["text_id"], row["sequence"]), []).append(row)
    assert len(by_chain) == 6  # 3 texts x 2 sequences
    source = {t.id: t.text for t in spec.texts}
    for (text_id, seq), rows in by_chain.items():
        chain = next(c for c in spec.sequences if c.name == seq)
        rows.sort(key=lambda r: r["hop"])
        assert [r["hop"] for r in rows] == list(range(1, len(rows) + 1))
        previous = source[text_id]
        for r in rows:
            h = r["hop"]
            assert (r["src_lang"], r["tgt_lang"]) == chain.langs[h - 1 : h + 1]
            assert r["seed"] == hop_seed(spec, "tiny-qwen3", text_id, seq, h) and r["cap"] == 6
            # the prompt is the E.3 template around the previous hop's output, in the chat template
            _, ids = backend.tok.chat(translation_prompt(previous, r["src_lang"], r["tgt_lang"]))
            assert r["prompt_ids"] == ids
            assert r["text"] == backend.tok.decode_batch([r["output_ids"]])[0]
            assert len(r["output_ids"]) <= 6
            assert r["capped"] == (r["finish_reason"] == "length")
            assert r["generator"].startswith("transformers ")
            if r["empty"]:
                assert r is rows[-1]  # an empty hop ends the chain
                break
            previous = r["text"].strip()
        else:
            assert len(rows) == chain.hops
    assert any(r["capped"] for r in hops)  # a 6-token cap is hit by a random model
    samples = result.samples.set_index(["text_id", "sequence"])
    finished = [k for k, rows in by_chain.items() if not rows[-1]["empty"]]
    for key in finished:
        status = {"a": "judged", "b": "judged", "c": "unjudged"}[key[0]]
        assert samples.loc[key, "status"] == status
    for key in (k for k in finished if k[0] == "a"):
        assert samples.loc[key, "mqm"] == 94.0 and samples.loc[key, "passed"]  # 100 - 1 - 5
        assert samples.loc[key, "judge_score"] == 88.0 and samples.loc[key, "parse"] == "strict"
    for key in (k for k in finished if k[0] == "b"):
        assert samples.loc[key, "parse"] == "fenced" and samples.loc[key, "judge_attempts"] == 2
    # retries get new seeds; only unparsed chains are re-asked
    round1 = [r for r in judge.seen if r.name.endswith("attempt 1")]
    assert {r.name.split("/")[1] for r in round1} <= {"b", "c"}
    assert all(
        r.seed == judge_seed(spec, "tiny-qwen3", r.name.split("/")[1], r.name.split("/")[2].split()[0], 1)
        for r in round1
    )
    assert result.counts()["unjudged"] == sum(1 for k in finished if k[0] == "c")


class Recording:
    """Delegates to a backend and keeps every request it was sent."""

    def __init__(self, inner) -> None:
        self.inner, self.tok, self.seen = inner, inner.tok, []
        self.name, self.version = inner.name, inner.version

    def generate(self, requests):
        self.seen += requests
        return self.inner.generate(requests)


@pytest.mark.parametrize("structured", [True, False])
def test_judge_requests_carry_the_reply_schema(tmp_path, tiny, backend, texts_file, structured):
    spec = make_spec(tiny, texts_file, sequences=["en>sw>en"], judge={"retries": 0, "structured": structured})
    translator, judge = Recording(backend), FakeJudge(backend.tok, lambda name: GOOD)
    run_roundtrip(spec, tmp_path / "run", translator, judge)
    assert len(translator.seen) == 6 and all(r.json_schema is None for r in translator.seen)
    assert len(judge.seen) == 3
    for r in judge.seen:
        if structured:
            assert r.json_schema["required"] == ["score", "classification", "issues"]
            severity = r.json_schema["properties"]["issues"]["items"]["properties"]["severity"]
            assert severity == {"type": "string", "enum": ["minor", "major", "critical"]}
        else:
            assert r.json_schema is None


def test_empty_hop_ends_the_chain_and_counts_as_failed(tmp_path, tiny, backend, texts_file):
    spec = make_spec(tiny, texts_file, sequences=["en>de>th>en"])
    wrapped = EmptyOn(backend, "/a/en")  # every hop of text a, so hop 1
    result = run_roundtrip(spec, tmp_path / "run", wrapped, FakeJudge(backend.tok, lambda name: GOOD))
    store = RunStore(tmp_path / "run", spec.identity(), spec.as_dict())
    rows_a = [r for r in store.read_all("hops/") if r["text_id"] == "a"]
    assert [(r["hop"], r["empty"], r["output_ids"]) for r in rows_a] == [(1, True, [backend.eos[0]])]
    sample = result.samples.set_index("text_id").loc["a"]
    assert (sample["status"], sample["failed_hop"], sample["mqm"], sample["passed"]) == ("failed", 1, 0.0, False)
    assert result.counts()["failed_empty_hop"] == 1 and result.counts()["samples"] == 3
    assert "a" not in {r["text_id"] for r in store.read_all("judge/")}
    metrics = roundtrip_metrics(result.samples, n_boot=200)
    overall = metrics[metrics["by"] == "overall"].iloc[0]
    assert overall["n_failed"] == 1 and overall["n_texts"] == 3
    assert overall["pass_share"] == pytest.approx(2 / 3)  # the failed sample stays in, as a fail


def test_interrupted_run_resumes_at_the_first_missing_wave(tmp_path, tiny, backend, texts_file):
    spec = make_spec(tiny, texts_file)

    class Crash(Exception):
        pass

    def crash(name, rows):
        if name == "hops/hop-02.parquet":
            raise Crash

    with pytest.raises(Crash):
        run_roundtrip(spec, tmp_path / "killed", backend, FakeJudge(backend.tok, judge_reply), on_wave=crash)
    resumed = run_roundtrip(spec, tmp_path / "killed", backend, FakeJudge(backend.tok, judge_reply))
    assert resumed.skipped == ["hops/hop-01.parquet", "hops/hop-02.parquet"]
    assert resumed.written == ["hops/hop-03.parquet", "judge/round-00.parquet", "judge/round-01.parquet"]
    whole = run_roundtrip(spec, tmp_path / "whole", backend, FakeJudge(backend.tok, judge_reply))
    for prefix in ("hops/", "judge/"):
        a = RunStore(tmp_path / "killed", spec.identity(), {}).read_all(prefix)
        b = RunStore(tmp_path / "whole", spec.identity(), {}).read_all(prefix)
        assert a == b and a
    assert resumed.samples.equals(whole.samples)
    again = run_roundtrip(spec, tmp_path / "whole", backend, FakeJudge(backend.tok, judge_reply))
    assert again.written == [] and len(again.skipped) == 5
    with pytest.raises(MindcapError, match="another round-trip run"):
        run_roundtrip(make_spec(tiny, texts_file, seed=4), tmp_path / "whole", backend, FakeJudge(backend.tok, GOOD))


def run_cli(args: list[str], code: int = 0) -> None:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == code


def test_cli_dry_run_and_run(tmp_path, tiny, backend, texts_file, capsys, monkeypatch):
    run_cli(
        [
            "roundtrip",
            "--out-dir",
            str(tmp_path / "r"),
            "--model",
            "org/m",
            "--sequences",
            "lit:all",
            "--sample",
            "200",
            "--dry-run",
            "--format",
            "json",
        ]
    )
    plan = json.loads(capsys.readouterr().out)
    assert (plan["chains"], plan["translation_requests"], plan["judge_requests"]) == (1600, 8000, 1600)
    assert not (tmp_path / "r").exists()
    import mindcap_tok.roundtrip as rt

    monkeypatch.setattr(rt, "open_backends", lambda spec, name: (backend, FakeJudge(backend.tok, judge_reply)))
    job = tmp_path / "job.toml"
    job.write_text(f'model = "{tiny}"\nmodel_name = "tiny-qwen3"\nmax_tokens = 6\n[judge]\nretries = 1\n', "utf-8")
    args = [
        "roundtrip",
        str(job),
        "--out-dir",
        str(tmp_path / "run"),
        "--texts",
        str(texts_file),
        "--sequences",
        "en>sw>en",
        "--seed",
        "3",
        "--format",
        "json",
    ]
    run_cli(args)
    out = json.loads(capsys.readouterr().out)
    assert out["counts"]["samples"] == 3 and out["written"][0] == "hops/hop-01.parquet"
    groups = {(m["by"], m["group"]) for m in out["metrics"]}
    assert groups >= {("overall", "all"), ("sequence", "eng_Latn>swh_Latn>eng_Latn"), ("resource", "custom")}
    assert {g for by, g in groups if by == "category"} == {"stem", "informal"}
    seen = {}

    def judge_backend(spec, name):
        seen["spec"], seen["judge"] = spec, FakeJudge(backend.tok, judge_reply)
        return backend, seen["judge"]

    monkeypatch.setattr(rt, "open_backends", judge_backend)
    flags = ["--no-judge-structured", "--judge-base-url", "http://127.0.0.1:9/v1", "--out-dir", str(tmp_path / "r2")]
    run_cli([*args[:2], *args[4:], *flags])
    capsys.readouterr()
    assert seen["spec"].judge.base_url == ("http://127.0.0.1:9/v1",) and not seen["spec"].judge.structured
    assert seen["judge"].seen and all(r.json_schema is None for r in seen["judge"].seen)
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "x.csv").write_text("x")
    run_cli([*args[:3], str(tmp_path / "foreign"), *args[4:]], code=2)
    assert "not a round-trip run's" in capsys.readouterr().err


@pytest.mark.vllm  # runs in the vLLM stage of scripts/test-all.sh
def test_vllm_constrains_a_request_with_a_schema_to_it(engine):
    """The tiny random model writes noise; a request carrying the judge's schema is decoded under it (vLLM's
    structured outputs), so its replies spell the schema's first key, while the same request without one does not."""
    from mindcap_tok.roundtrip.prompts import judge_schema

    prompt = tuple(engine.tok.chat("Judge this translation.")[1])
    free, constrained = engine.generate(
        [GenRequest(prompt, 2, 24, 0, 1.0), GenRequest(prompt, 2, 24, 0, 1.0, json_schema=judge_schema())]
    )
    texts = {
        name: [re.sub(r"\s", "", t) for t in engine.tok.decode_batch([c.ids for c in completions])]
        for name, completions in (("free", free), ("constrained", constrained))
    }
    assert all(t.startswith('{"score":') for t in texts["constrained"]), texts
    assert not any(t.startswith("{") for t in texts["free"]), texts


def test_the_judge_runs_on_a_server(tmp_path, tiny, backend, texts_file):
    """Hops in process, the judge through a real local OpenAI-compatible server (text-only replies, as a hosted
    API gives): every judge request reaches it with the reply schema as ``response_format``, and the replies are
    parsed and scored (GOOD: one minor and one major issue, MQM 100 - 1 - 5 = 94)."""
    from local_http import LocalHTTP
    from mindcap_tok.roundtrip import open_backends

    bodies: list[dict] = []

    def get(h) -> None:
        h.reply(404, {"error": {"message": "Not Found"}})

    def post(h, raw: bytes) -> None:
        body = json.loads(raw)
        bodies.append(body)
        h.reply(200, {"choices": [{"index": i, "text": GOOD, "finish_reason": "stop"} for i in range(body["n"])]})

    server = LocalHTTP(get, post)
    try:
        judge_spec = {"retries": 0, "model": str(tiny), "base_url": [server.url]}
        spec = make_spec(tiny, texts_file, sequences=["en>sw>en"], judge=judge_spec)
        backends, judge = open_backends(spec, "transformers")
        assert judge.name == "server" and backends["tiny-qwen3"] is not judge
        result = run_roundtrip(spec, tmp_path / "run", backends, judge)
    finally:
        server.close()
    judged = [b for b in bodies if "response_format" in b]
    assert len(bodies) == len(judged) == 3 == result.counts()["judged"]  # only the judge's requests, all with it
    schema = judged[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["issues"]["items"]["properties"]["severity"]["enum"] == ["minor", "major", "critical"]
    samples = result.samples
    assert samples["mqm"].tolist() == [94.0] * 3 and samples["judge_score"].tolist() == [88.0] * 3


NONSENSE = json.dumps({"score": 10, "classification": "1-nonsense", "issues": []})


def test_two_judges_on_local_servers_judge_every_back_translation(tmp_path, tiny, backend, texts_file, qwen):
    """Two judges, each a real local OpenAI-compatible server with a fixed reply (judge-a: GOOD, MQM 94; judge-b:
    '1-nonsense' with no issue, MQM 100 and inconsistent): every back-translation is judged by each, the report
    gives every metric per judge and lists judge-b's inconsistent replies."""
    from local_http import LocalHTTP
    from mindcap_tok.roundtrip import open_backends
    from mindcap_tok.roundtrip.report import ReportOptions, roundtrip_report

    def server(reply: str) -> LocalHTTP:
        def post(h, raw: bytes) -> None:
            n = json.loads(raw)["n"]
            h.reply(200, {"choices": [{"index": i, "text": reply, "finish_reason": "stop"} for i in range(n)]})

        return LocalHTTP(lambda h: h.reply(404, {"error": {"message": "Not Found"}}), post)

    a, b = server(GOOD), server(NONSENSE)
    try:
        judges = [
            {"model": str(tiny), "model_name": name, "base_url": [s.url], "retries": 0}
            for name, s in (("judge-a", a), ("judge-b", b))
        ]
        spec = make_spec(tiny, texts_file, sequences=["en>sw>en"], judge=judges)
        backends, judge = open_backends(spec, "transformers")
        assert set(judge) == {"judge-a", "judge-b"} and judge["judge-a"] is not judge["judge-b"]
        result = run_roundtrip(spec, tmp_path / "run", backends, judge)
    finally:
        a.close()
        b.close()
    assert result.written[-1] == "judge/round-00.parquet" and len(result.samples) == 6  # 3 chains x 2 judges
    by_judge = result.samples.groupby("judge_model")["mqm"].apply(list).to_dict()
    assert by_judge == {"judge-a": [94.0] * 3, "judge-b": [100.0] * 3}
    rep = roundtrip_report(
        tmp_path / "run",
        tmp_path / "rep",
        options=ReportOptions(tokenizers={"tiny-qwen3": qwen}, flores=False, lid=False, n_boot=20),
    )
    over = rep.metrics[rep.metrics["by"] == "overall"].set_index("judge_model")
    assert over.loc["judge-a", "mean_mqm"] == 94.0 and over.loc["judge-b", "mean_judge_score"] == 10.0
    assert rep.summary["judge_consistency"] == {
        "judge-a": {"judged": 3, "inconsistent": 0},
        "judge-b": {"judged": 3, "inconsistent": 3},
    }
    # resuming reads both judges' replies back from the one round file, asking no server
    again = run_roundtrip(spec, tmp_path / "run", backends, {"judge-a": None, "judge-b": None})
    assert again.written == [] and again.samples["mqm"].tolist() == result.samples["mqm"].tolist()


def test_cli_several_judge_models(capsys):
    run_cli(
        [
            "roundtrip",
            "--out-dir",
            "unused",
            "--model",
            "org/m",
            "--sequences",
            "en>de>en",
            "--sample",
            "4",
            "--judge-model",
            "org/j1",
            "org/j2",
            "--dry-run",
            "--format",
            "json",
        ]
    )
    plan = json.loads(capsys.readouterr().out)
    assert (plan["judges"], plan["chains"], plan["judge_requests"], plan["max_judge_requests"]) == (2, 4, 8, 24)


def test_per_model_sampling_and_caps(tmp_path, tiny, backend, texts_file):
    per_model = {"a": {"temperature": 0.3, "max_tokens": 4}}
    spec = make_spec(
        tiny,
        texts_file,
        model=[str(tiny), str(tiny)],
        model_name=["a", "b"],
        sequences=["en>sw>en"],
        per_model=per_model,
    )
    assert spec.models[0].sampling.temperature == 0.3 and spec.models[0].sampling.top_p == 0.95  # over [sampling]
    assert spec.models[1].sampling is None and spec.model_cap(spec.models[1]) == 6
    assert spec.identity()["per_model"] == {
        "a": {"sampling": {"temperature": 0.3, "top_p": 0.95, "top_k": 20}, "max_tokens": 4}
    }
    assert "per_model" not in make_spec(tiny, texts_file).identity()  # one-setting runs keep their identity
    assert plan_roundtrip(spec)["worst_case_tokens"] == 3 * 2 * 4 + 3 * 2 * 6  # texts x hops x cap, per model
    rec = {"a": Recording(backend), "b": Recording(backend)}
    run_roundtrip(spec, tmp_path / "run", rec, FakeJudge(backend.tok, judge_reply))
    assert {(r.max_tokens, r.temperature) for r in rec["a"].seen} == {(4, 0.3)}
    assert {(r.max_tokens, r.temperature) for r in rec["b"].seen} == {(6, 0.8)}
    with pytest.raises(MindcapError, match=r"per_model\.c: unknown key; known: a, b"):
        make_spec(tiny, texts_file, model=[str(tiny), str(tiny)], model_name=["a", "b"], per_model={"c": {}})
    with pytest.raises(MindcapError, match=r"per_model\.a\.seed: unknown key"):
        make_spec(tiny, texts_file, model_name="a", model=str(tiny), per_model={"a": {"seed": 1}})


def _job(tmp_path, tiny, texts_file):
    job = tmp_path / "job.toml"
    job.write_text(
        f'model = "{tiny}"\nmodel_name = "tiny-qwen3"\nbackend = "transformers"\ntexts = "{texts_file}"\n'
        'sequences = ["en>sw>en"]\nmax_tokens = 6\nseed = 3\n[judge]\nretries = 0\n',
        "utf-8",
    )
    return job


def test_a_symlink_inside_the_run_folder_is_refused_and_nothing_goes_through_it(
    tmp_path, tiny, backend, texts_file, capsys, monkeypatch
):
    import mindcap_tok.roundtrip as rt

    monkeypatch.setattr(rt, "open_backends", lambda spec, name: (backend, FakeJudge(backend.tok, judge_reply)))
    outside, run = tmp_path / "outside", tmp_path / "run"
    outside.mkdir()
    run.mkdir()
    (run / "hops").symlink_to(outside)
    run_cli(["roundtrip", str(_job(tmp_path, tiny, texts_file)), "--out-dir", str(run)], code=2)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "hops is a symlink" in err, err
    assert list(outside.iterdir()) == [] and [p.name for p in run.iterdir()] == ["hops"]

    # a link made while a run goes (after its checks): the next write through it is refused, nothing lands there
    (run / "hops").unlink()
    spec = rt.load_spec(_job(tmp_path, tiny, texts_file), {})

    def plant(name: str, rows: int) -> None:
        if name == "hops/hop-01.parquet":
            (run / "judge").symlink_to(outside)

    with pytest.raises(MindcapError, match=r"judge is a symlink"):
        run_roundtrip(spec, run, backend, FakeJudge(backend.tok, judge_reply), on_wave=plant)
    assert list(outside.iterdir()) == []


def test_a_second_run_into_a_folder_being_written_refuses_and_the_first_ends_whole(tmp_path, tiny, backend, texts_file):
    """Two real processes: while this one runs (holding the folder after its first wave), the CLI in another
    process starts the same run into the same folder; it refuses in one line, and this run ends whole."""
    import os
    import subprocess
    import sys

    from lock_holder import SRC
    from mindcap_tok.roundtrip import load_spec

    job, run = _job(tmp_path, tiny, texts_file), tmp_path / "run"
    spec = load_spec(job, {})
    second = {}

    def start_the_second(name: str, rows: int) -> None:
        if name == "hops/hop-01.parquet":
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
            args = [sys.executable, "-m", "mindcap_tok", "roundtrip", str(job), "--out-dir", str(run)]
            second["proc"] = subprocess.run(args, env=env, capture_output=True, timeout=300, text=True)

    result = run_roundtrip(spec, run, backend, FakeJudge(backend.tok, judge_reply), on_wave=start_the_second)
    proc = second["proc"]
    # one error line (the transformers backend's weight-loading progress may come before it)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"is being written by another run (process {os.getpid()} on" in errors[0]
    assert result.written == ["hops/hop-01.parquet", "hops/hop-02.parquet", "judge/round-00.parquet"]
    store = RunStore(run, spec.identity(), spec.as_dict())
    assert sorted(store.manifest["files"]) == result.written
    assert [len(store.read(n)) for n in result.written] == [3, 3, 3]  # every file whole, all of this run's


# -- judges that nest too deeply or never answer -------------------------------------------------------------------


def test_judge_server_bounds_come_from_judge_and_server_tables(tiny, texts_file):
    """A judge's server is waited for as its own timeout_s/max_retries say, else as [server]'s, else the
    defaults (600 s, 5); neither enters the run's identity (a resumed run may change them)."""
    url = ["http://127.0.0.1:9/v1"]
    plain = make_spec(tiny, texts_file, judge={"base_url": url})
    assert (plain.judge_server(plain.judge).timeout_s, plain.judge_server(plain.judge).max_retries) == (600.0, 5)
    server = {"timeout_s": 7, "max_retries": 1}
    inherited = make_spec(tiny, texts_file, server=server, judge={"base_url": url})
    got = inherited.judge_server(inherited.judge)
    assert (got.base_url, got.timeout_s, got.max_retries) == (tuple(url), 7.0, 1)
    own = make_spec(tiny, texts_file, server=server, judge={"base_url": url, "timeout_s": 3, "max_retries": 0})
    assert (own.judge_server(own.judge).timeout_s, own.judge_server(own.judge).max_retries) == (3.0, 0)
    assert own.identity() == inherited.identity() == plain.identity()
    assert make_spec(tiny, texts_file).judge_server(plain.judge.model_copy(update={"base_url": ()})) is None
    with pytest.raises(MindcapError, match=r"judge\.timeout_s: must be > 0, got 0"):
        make_spec(tiny, texts_file, judge={"base_url": url, "timeout_s": 0})


def test_judge_replies_nested_too_deeply_are_unjudged_saying_why(tmp_path, tiny, backend, texts_file):
    """A real local judge server whose replies nest 1,500 brackets deep (past the JSON decoder's recursion
    limit): the run completes, every sample unjudged, every judge record saying why."""
    from local_http import LocalHTTP
    from mindcap_tok.roundtrip import open_backends
    from mindcap_tok.roundtrip.store import judge_file

    reply = "[" * 1500 + "]" * 1500

    def post(h, raw: bytes) -> None:
        n = json.loads(raw)["n"]
        h.reply(200, {"choices": [{"index": i, "text": reply, "finish_reason": "stop"} for i in range(n)]})

    server = LocalHTTP(lambda h: h.reply(404, {"error": {"message": "Not Found"}}), post)
    try:
        judge_spec = {"retries": 0, "model": str(tiny), "base_url": [server.url], "max_tokens": 4096}
        spec = make_spec(tiny, texts_file, sequences=["en>sw>en"], judge=judge_spec)
        backends, judge = open_backends(spec, "transformers")
        result = run_roundtrip(spec, tmp_path / "run", backends, judge)
    finally:
        server.close()
    assert result.counts()["judged"] == 0 and result.samples["status"].tolist() == ["unjudged"] * 3
    rows = RunStore(tmp_path / "run", spec.identity(), spec.as_dict()).read(judge_file(0))
    assert [r["error"] for r in rows] == ["not read: brackets nested 1500 deep, above the 64 read"] * 3
    assert all(r["raw"] == reply and r["parse"] is None for r in rows)


@pytest.mark.parametrize("mode", ["silent", "trickle"])
def test_a_stalling_judge_server_ends_roundtrip_after_the_timeout(tmp_path, tiny, texts_file, capsys, mode):
    """Hops in process, the judge on a server that accepts the connection and never answers (or trickles a byte
    every 0.1 s): --timeout 0.5 and --max-retries 0 end the run after one attempt of about 0.5 s, in one line
    naming the URL; the hops stay (a rerun resumes), no judge round is written."""
    pytest.importorskip("httpx", reason="the server backend needs the server extra (httpx)")
    from local_http import Stalling
    from mindcap_tok.roundtrip.store import judge_file

    server = Stalling(mode)
    out = tmp_path / "run"
    args = [
        "roundtrip",
        "--out-dir",
        str(out),
        "--model",
        str(tiny),
        "--texts",
        str(texts_file),
        "--sequences",
        "en>sw>en",
        "--max-tokens",
        "4",
        "--seed",
        "3",
        "--backend",
        "transformers",
        "--judge-model",
        str(tiny),
        "--judge-base-url",
        server.url,
        "--timeout",
        "0.5",
        "--max-retries",
        "0",
    ]
    try:
        run_cli(args, code=2)
    finally:
        server.close()
    err = capsys.readouterr().err.strip().splitlines()
    found = re.fullmatch(
        rf"error: request judge \S+ attempt 0 failed after 1 attempt\(s\) in ([0-9.]+) s: no answer from "
        rf"{re.escape(server.url)} within 0\.5 s",
        err[-1],
    )
    # one error line, the last (transformers' weight-loading bars come before it)
    assert found and [line for line in err if "error" in line] == [err[-1]] and 0.5 <= float(found[1]) < 3.0, err
    assert (out / "hops" / "hop-01.parquet").exists() and not (out / judge_file(0)).exists()


def test_timeout_needs_a_server_in_the_run(tmp_path, tiny, texts_file, capsys):
    run_cli(
        [
            "roundtrip",
            "--out-dir",
            str(tmp_path / "r"),
            "--model",
            str(tiny),
            "--texts",
            str(texts_file),
            "--sequences",
            "en>sw>en",
            "--backend",
            "transformers",
            "--timeout",
            "5",
        ],
        code=2,
    )
    assert capsys.readouterr().err.strip() == (
        "error: --timeout is for the server backend; this run names no server ([server] table, "
        "judge base_url or --judge-base-url)"
    )
    assert not (tmp_path / "r").exists()
