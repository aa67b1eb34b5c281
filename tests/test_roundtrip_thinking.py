"""Reasoning models in round trips: the spec's thinking switch per model (one model listed twice, thinking and
instruct), hops that pass on only their answer channel (the tiny think-token Qwen3 on the transformers backend,
its thoughts scripted where the test needs one closed), hand-built hop records for the edge cases, and the
report's thinking/instruct comparison counted by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.generation.backends import Completion
from mindcap_tok.roundtrip import CompareOptions, compare_runs, parse_spec, run_roundtrip
from mindcap_tok.roundtrip.prompts import translation_prompt
from mindcap_tok.roundtrip.report import ReportOptions, roundtrip_report
from mindcap_tok.roundtrip.run import apply_hop, new_chains
from mindcap_tok.roundtrip.sequences import parse_chain
from mindcap_tok.roundtrip.store import RunStore
from mindcap_tok.roundtrip.texts import Text
from mindcap_tok.roundtrip.thinking import hop_channel
from mindcap_tok.store.think import think_markers

torch = pytest.importorskip("torch", reason="the transformers backend needs the torch extra")

GOOD = json.dumps({"score": 90, "classification": "8-good", "issues": [{"severity": "minor", "description": "a"}]})


@pytest.fixture(scope="module")
def tiny(tiny_think):
    """The thinking model of conftest.py: every test here reads its ``<think>`` tokens."""
    return tiny_think


@pytest.fixture(scope="module")
def backend(tiny):
    from mindcap_tok.generation.backends import load_backend

    return load_backend("transformers", str(tiny), tokenizer_name="tiny-think")


@pytest.fixture
def texts_file(tmp_path):
    path = tmp_path / "texts.jsonl"
    rows = [{"id": "a", "text": "Janet has 16 eggs."}, {"id": "b", "text": "The answer is 9."}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def twin_spec(tiny, texts_file, **kw):
    data = {
        "model": [str(tiny), str(tiny)],
        "model_name": ["tiny-think", "tiny-instruct"],
        "texts": str(texts_file),
        "sequences": ["en>de>en"],
        "max_tokens": 6,
        "seed": 3,
        "judge": {"model_name": "judge", "retries": 0},
        "per_model": {"tiny-think": {"thinking": True}},
    }
    return parse_spec(data | kw)


def test_the_switch_per_model(tiny, texts_file):
    spec = twin_spec(tiny, texts_file)
    assert [(m.name, m.thinking) for m in spec.models] == [("tiny-think", True), ("tiny-instruct", False)]
    assert spec.identity()["per_model"]["tiny-think"]["thinking"] is True
    assert "tiny-instruct" not in spec.identity()["per_model"]
    plain = twin_spec(tiny, texts_file, per_model={})
    assert "per_model" not in plain.identity()  # instruct runs keep their identity of before
    everyone = twin_spec(tiny, texts_file, per_model={}, thinking=True)
    assert all(m.thinking for m in everyone.models)
    with pytest.raises(MindcapError, match="thinking: must be of type bool, got 1"):
        twin_spec(tiny, texts_file, thinking=1)
    with pytest.raises(MindcapError, match="think_close: must be a non-empty string, for a model with thinking"):
        twin_spec(tiny, texts_file, per_model={"tiny-instruct": {"think_close": "</r>"}})


def _ids(tok, text: str) -> list[int]:
    return tok.tokenizer.encode(text, add_special_tokens=False).ids


def test_hop_channel_edge_cases(qwen):
    markers = think_markers(qwen)
    o, c = qwen.tokenizer.token_to_id("<think>"), qwen.tokenizer.token_to_id("</think>")
    decode = lambda ids: qwen.tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    thought = [o, *_ids(qwen, "Hallo heißt hello"), c]
    got = hop_channel([*thought, *_ids(qwen, "\nHallo Welt")], markers, tokenizer=qwen, decode=decode)
    assert (got["think_end"], got["thought_tokens"], got["answer"]) == (len(thought) - 1, len(thought), "\nHallo Welt")
    unclosed = hop_channel([o, *_ids(qwen, "Hallo heißt")], markers, tokenizer=qwen, decode=decode)
    assert unclosed["unclosed"] and unclosed["answer"] == "" and unclosed["answer_tokens"] == 0
    # two think blocks: the first closing token ends the thought; the second block is answer text
    two = hop_channel([*thought, *_ids(qwen, "Welt"), o, *_ids(qwen, "x"), c], markers, tokenizer=qwen, decode=decode)
    assert two["answer"] == "Welt<think>x</think>" and two["thought_tokens"] == len(thought)
    # the empty thought Qwen3 writes with thinking off
    empty = hop_channel([o, *_ids(qwen, "\n\n"), c, *_ids(qwen, "Welt")], markers, tokenizer=qwen, decode=decode)
    assert empty["answer"] == "Welt"


def test_hand_built_hops_pass_on_the_answer_channel():
    chain = parse_chain("en>de>th>en")
    chains = new_chains(["m"], [Text("a", "Hello.", "x", None), Text("b", "Hi.", "x", None)], [chain])
    index = {c.key: c for c in chains}
    base = {"model": "m", "sequence": chain.name, "capped": False}
    apply_hop(
        index,
        base
        | {
            "text_id": "a",
            "hop": 1,
            "text": "<think>thought</think> Hallo.",
            "thinking": True,
            "answer": " Hallo. ",
            "unclosed": False,
            "empty": False,
        },
    )
    apply_hop(
        index,
        base
        | {
            "text_id": "b",
            "hop": 1,
            "text": "<think>still thinking",
            "thinking": True,
            "answer": "",
            "unclosed": True,
            "empty": True,
            "capped": True,
        },
    )
    a, b = chains
    assert a.current == "Hallo." and a.failed_hop is None  # only the answer, stripped
    assert (b.failed_hop, b.unclosed_hops, b.capped_hops, b.current) == (1, 1, 1, "Hi.")
    apply_hop(index, base | {"text_id": "a", "hop": 2, "text": "สวัสดี", "empty": False})  # an instruct record
    assert a.current == "สวัสดี" and a.unclosed_hops == 0


class ScriptedThoughts:
    """The tiny model, but while its prompts are rendered with thinking on each decode is prefixed with a closed
    thought (text ``a``) or replaced by an unclosed one (text ``b``): real ids, the channel known by hand."""

    def __init__(self, inner) -> None:
        self.inner, self.tok, self.name, self.version = inner, inner.tok, inner.name, inner.version
        hf = inner.tok.hf
        self.open, self.close = hf.convert_tokens_to_ids("<think>"), hf.convert_tokens_to_ids("</think>")
        self.thought = (self.open, *inner.tok.encode("Schritt 1"), self.close)
        self.answers: dict[str, tuple[int, ...]] = {}

    def generate(self, requests):
        out = self.inner.generate(requests)
        if not self.tok.thinking:
            return out
        done = []
        for r, (c,) in zip(requests, out, strict=True):
            if "/b/" in r.name:
                done.append([Completion((self.open, *self.inner.tok.encode("Schritt")), "length")])
            else:
                answer = tuple(i for i in c.ids if i not in (self.open, self.close))
                self.answers[r.name] = answer
                done.append([Completion(self.thought + answer, c.finish_reason)])
        return done


class FakeJudge:
    name, version = "fake-judge", "1"

    def __init__(self, tok) -> None:
        self.tok, self.seen = tok, []

    def generate(self, requests):
        self.seen += requests
        return [[Completion(tuple(self.tok.encode(GOOD)), "stop")] for _ in requests]


def test_twins_run_and_report(tmp_path, tiny, backend, texts_file, qwen):
    spec = twin_spec(tiny, texts_file)
    scripted, judge = ScriptedThoughts(backend), FakeJudge(backend.tok)
    result = run_roundtrip(spec, tmp_path / "run", {"tiny-think": scripted, "tiny-instruct": backend}, judge)
    hops = RunStore(tmp_path / "run", spec.identity(), spec.as_dict()).read_all("hops/")
    rows = {(r["model"], r["text_id"], r["hop"]): r for r in hops}
    hf = backend.tok.hf
    for r in hops:
        prompt = hf.decode(r["prompt_ids"])
        # thinking on: no empty think block in the prompt (the tiny template's thinking-off marker)
        assert ("<think>\n\n</think>" in prompt) == (r["model"] == "tiny-instruct"), r
        assert r["thinking"] == (r["model"] == "tiny-think")
    # text a: a closed thought; the next hop's prompt holds only the answer channel
    a1 = rows[("tiny-think", "a", 1)]
    answer = scripted.answers["tiny-think/a/eng_Latn>deu_Latn>eng_Latn/hop 1"]
    n_thought = len(scripted.thought)
    assert (a1["think_end"], a1["thought_tokens"], a1["answer_tokens"]) == (n_thought - 1, n_thought, len(answer))
    assert a1["answer"] == hf.decode(list(answer), skip_special_tokens=True) and not a1["unclosed"]
    assert not a1["empty"]  # seeded: the tiny model's hop-1 answer has text
    want = translation_prompt(a1["answer"].strip(), "deu_Latn", "eng_Latn")
    text = hf.apply_chat_template(
        [{"role": "user", "content": want}], tokenize=False, add_generation_prompt=True, enable_thinking=True
    )
    assert rows[("tiny-think", "a", 2)]["prompt_ids"] == hf(text, add_special_tokens=False)["input_ids"]
    assert "Schritt" not in want
    # text b: the thought never closed: nothing passed on, the chain fails at hop 1
    b1 = rows[("tiny-think", "b", 1)]
    assert b1["unclosed"] and b1["empty"] and b1["answer"] == "" and ("tiny-think", "b", 2) not in rows
    samples = result.samples.set_index(["model", "text_id"])
    assert samples.loc[("tiny-think", "b"), "status"] == "failed"
    assert result.counts()["unclosed_thought_hops"] == 1
    # the judge is prompted with thinking off
    assert judge.seen and all("<think>\n\n</think>" in hf.decode(list(r.prompt_ids)) for r in judge.seen)

    rep = roundtrip_report(
        tmp_path / "run",
        tmp_path / "rep",
        options=ReportOptions(
            tokenizers={"tiny-think": backend.tok.resolved, "tiny-instruct": backend.tok.resolved},
            flores=False,
            lid=False,
            n_boot=50,
        ),
    )
    twins = pd.read_csv(tmp_path / "rep" / "thinking.csv")
    assert len(twins) == 1
    row = twins.iloc[0]
    assert (row["thinking_model"], row["instruct_model"]) == ("tiny-think", "tiny-instruct")
    by_hand = result.samples.groupby("model")["passed"].mean()  # no sample unjudged: every reply parses
    assert row["pass_share_thinking"] == pytest.approx(by_hand["tiny-think"])
    assert row["pass_share_instruct"] == pytest.approx(by_hand["tiny-instruct"])
    assert row["pass_share_diff"] == pytest.approx(by_hand["tiny-think"] - by_hand["tiny-instruct"])
    think_hops = [r for r in hops if r["model"] == "tiny-think"]
    specials = backend.tok.resolved.special_ids
    thought_by_hand = [len(r["output_ids"]) if r["unclosed"] else r["think_end"] + 1 for r in think_hops]
    answer_by_hand = [
        sum(i not in specials for i in r["output_ids"][t:]) for r, t in zip(think_hops, thought_by_hand, strict=True)
    ]
    assert row["thought_tokens_per_hop_thinking"] == pytest.approx(sum(thought_by_hand) / len(think_hops))
    assert row["answer_tokens_per_hop_thinking"] == pytest.approx(sum(answer_by_hand) / len(think_hops))
    assert row["thought_tokens_per_hop_instruct"] == 0
    assert row["unclosed_hop_share_thinking"] == pytest.approx(1 / len(think_hops))
    tokens = rep.hop_tokens.set_index(["model", "hop"])
    assert tokens.loc[("tiny-think", 1), "thought_tokens"] == sum(
        r["thought_tokens"] for r in think_hops if r["hop"] == 1
    )
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Thinking and instruct" in md and "1 hops never closed" in md
    board = compare_runs(run_dirs=[tmp_path / "run"], out_dir=tmp_path / "board", options=CompareOptions(n_boot=20))
    assert dict(zip(board.leaderboard["model"], board.leaderboard["thinking"], strict=True)) == {
        "tiny-think": True,
        "tiny-instruct": False,
    }


def test_cli_thinking_flag(tmp_path, tiny, texts_file, monkeypatch):
    import mindcap_tok.roundtrip as rt
    from mindcap_tok.cli.main import main

    seen = {}

    def capture(spec, name):
        seen["spec"] = spec
        raise MindcapError("stop here")

    monkeypatch.setattr(rt, "open_backends", capture)
    job = tmp_path / "job.toml"
    job.write_text(f'model = "{tiny}"\nmodel_name = "tiny"\nsequences = ["en>de>en"]\ntexts = "{texts_file}"\n')
    for flag, want in (("--thinking", True), ("--no-thinking", False)):
        with pytest.raises(SystemExit) as done:
            main(["roundtrip", str(job), "--out-dir", str(tmp_path / "run"), flag])
        assert done.value.code != 0 and seen.pop("spec").models[0].thinking is want


def test_a_model_listed_twice_is_loaded_once(tiny, texts_file, monkeypatch):
    import mindcap_tok.roundtrip.run as run

    loaded = []
    monkeypatch.setattr(run, "load_backend", lambda name, path, **kw: loaded.append(path) or object())
    backends, judge = run.open_backends(twin_spec(tiny, texts_file, judge={"retries": 0}), "transformers")
    assert loaded == [str(tiny)] and backends["tiny-think"] is backends["tiny-instruct"] is judge
