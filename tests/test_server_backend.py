"""The ``server`` backend against small REAL HTTP servers on 127.0.0.1 (``http.server`` in a thread, the fake of
``fake_server``) that answer with hand-written OpenAI/vLLM-shaped bodies and inject 429/500/dropped connections/slow
answers: request building, id extraction from each response shape, the retokenized path, retries, one-line errors,
resume."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

import pytest

pytest.importorskip("httpx", reason="the server backend needs the server extra (httpx)")

from fake_server import LABEL, ONE_REQUEST, TAMPER, decode, free_port, local_prompt, rule, server_backend, server_spec
from generation_job import frame
from mindcap_tok.cli.main import main
from mindcap_tok.errors import MindcapError
from mindcap_tok.generation.backends import GenRequest
from mindcap_tok.generation.backends.server import ServerBackend, parse_response, retry_after
from mindcap_tok.generation.generate import JobHooks, run_job
from mindcap_tok.generation.jobs import ServerSpec, load_spec, parse_spec, plan_job
from mindcap_tok.store.ledger import Ledger


def check_rows(rows, hf, *, retokenized=False) -> None:
    """Each record against the fake server's rule and the locally built prompt."""
    from mindcap_tok.generation import task_prompt
    from mindcap_tok.tasks.datasets import load_items
    from mindcap_tok.tasks.load import load_task

    mgsm = load_task("mgsm")
    assert len(rows) == 12 and len({(r["lang"], r["item"], r["sample"]) for r in rows}) == 12
    for r in rows:
        item = load_items(mgsm, r["lang"])[r["item"]]
        text, ids = local_prompt(hf, task_prompt(mgsm, item, arm="native", style="none").text)
        assert (r["prompt"], r["prompt_ids"]) == (text, ids)
        want, finish = rule(r["seed"], r["sample"], 12)
        if retokenized:
            want = hf(decode(hf, want), add_special_tokens=False)["input_ids"]
        assert r["output_ids"] == want and r["finish_reason"] == finish
        assert r["text"] == decode(hf, r["output_ids"])
        assert r["retokenized"] is retokenized and r["generator"] == "server"


# -- the spec ------------------------------------------------------------------------------------------------------


def test_server_table_is_typed_and_refuses_keys_in_the_file(tmp_path):
    base = {"model": "org/m", "arms": ["native"], "langs": ["de"], "items": [0], "k": 1, "design": "replay"}
    spec = parse_spec({**base, "server": {"base_url": "http://h:8000/v1/", "concurrency": 3, "endpoint": "chat"}})
    assert spec.server == ServerSpec(base_url=("http://h:8000/v1",), concurrency=3, endpoint="chat")
    assert spec.as_dict()["server"]["base_url"] == ("http://h:8000/v1",)
    assert "server" not in parse_spec(base).as_dict()  # old job files keep comparing equal
    two = parse_spec({**base, "server": {"base_url": ["http://a/v1", "https://b/v1"], "timeout_s": 5}})
    assert two.server.base_url == ("http://a/v1", "https://b/v1") and two.server.timeout_s == 5.0
    job = tmp_path / "job.toml"
    cases = {
        "concurrency = 0": "server.concurrency: must be an integer in 1..4096, got 0",
        "concurrency = -2": "server.concurrency: must be an integer in 1..4096, got -2",
        "concurrency = true": "server.concurrency: must be of type int, got true",
        'concurrency = "4"': "server.concurrency: must be of type int, got '4'",
        'api_key = "sk-123"': "server.api_key: must not be in the file",
        'api_key_env = "MY KEY"': "server.api_key_env: must name an environment variable",
        'endpoint = "responses"': "server.endpoint: must be one of completions, chat",
        'base_url = "localhost:8000"': "server.base_url: must be an http:// or https:// URL",
        "base_url = []": "server.base_url: must not be an empty list",
        "timeout_s = 0": "server.timeout_s: must be > 0",
        "retries = 2": "server.retries: unknown key; known: ",
    }
    for line, message in cases.items():
        job.write_text('model = "org/m"\narms = ["native"]\nlangs = ["de"]\ndesign = "replay"\n[server]\n' + line)
        with pytest.raises(MindcapError) as exc:
            load_spec(job)
        assert message in str(exc.value) and str(job) in str(exc.value) and "\n" not in str(exc.value), line


def test_backend_refuses_bad_options_before_sending(tiny, monkeypatch):
    with pytest.raises(MindcapError, match="needs a URL"):
        ServerBackend(str(tiny), "t", ServerSpec())
    with pytest.raises(MindcapError, match=r"^server\.concurrency: must be an integer in 1\.\.4096, got 0$"):
        ServerBackend(str(tiny), "t", ServerSpec(base_url=("http://127.0.0.1:9/v1",), concurrency=0))
    monkeypatch.delenv("MINDCAP_TEST_KEY", raising=False)
    with pytest.raises(MindcapError, match=r"MINDCAP_TEST_KEY .* unset"):
        ServerBackend(str(tiny), "t", ServerSpec(base_url=("http://127.0.0.1:9/v1",), api_key_env="MINDCAP_TEST_KEY"))


# -- request building and response shapes --------------------------------------------------------------------------


def test_request_bodies(tiny, fakes):
    fake = fakes()
    req = GenRequest((5, 6, 7), 3, 64, 1234, 0.6, 0.95, 20, text="<p>", user="hi", name="x")
    b = ServerBackend(str(tiny), "t", ServerSpec(base_url=(fake.url,), model="served"))
    assert b.version == "vllm 0.0.fake"
    assert b.body(req) == {
        "model": "served",
        "n": 3,
        "max_tokens": 64,
        "seed": 1234,
        "temperature": 0.6,
        "top_p": 0.95,
        "prompt": [5, 6, 7],
        "return_token_ids": True,
        "top_k": 20,
    }
    assert b.body(req, plain=True) == {
        "model": "served",
        "n": 3,
        "max_tokens": 64,
        "seed": 1234,
        "temperature": 0.6,
        "top_p": 0.95,
        "prompt": "<p>",
    }
    greedy = GenRequest((5,), 1, 16, 0, 0.0, stop_ids=(9, 11))  # a forcing continuation: greedy, ids only
    assert b.body(greedy) == {
        "model": "served",
        "n": 1,
        "max_tokens": 16,
        "seed": 0,
        "temperature": 0.0,
        "prompt": [5],
        "return_token_ids": True,
        "stop_token_ids": [9, 11],
    }
    with pytest.raises(MindcapError, match="forcing continuations cannot be sent"):
        b.body(greedy, plain=True)
    chat = ServerBackend(str(tiny), "t", ServerSpec(base_url=(fake.url,), endpoint="chat", logprob_ids=True))
    assert chat.served_model == str(tiny)  # the job's model unless [server] model names the served one
    assert chat.body(req) == {
        "model": str(tiny),
        "n": 3,
        "max_tokens": 64,
        "seed": 1234,
        "temperature": 0.6,
        "top_p": 0.95,
        "messages": [{"role": "user", "content": "hi"}],
        "return_token_ids": True,
        "top_k": 20,
        "chat_template_kwargs": {"enable_thinking": False},
        "return_tokens_as_token_ids": True,
        "logprobs": True,
        "top_logprobs": 0,
    }
    with pytest.raises(MindcapError, match="needs endpoint = completions"):
        chat.body(greedy)


def test_thinking_and_reasoning_effort_reach_the_server(tiny, fakes):
    fake = fakes()
    req = GenRequest((5,), 1, 8, 1, 0.0, text="<p>", user="hi")
    chat = ServerBackend(str(tiny), "t", ServerSpec(base_url=(fake.url,), endpoint="chat", reasoning_effort="high"))
    chat.tok.set_thinking(True)
    body = chat.body(req)
    assert body["chat_template_kwargs"] == {"enable_thinking": True} and body["reasoning_effort"] == "high"
    assert chat.body(req, plain=True)["reasoning_effort"] == "high"  # OpenAI's own parameter: hosted APIs too
    plain = ServerBackend(str(tiny), "t", ServerSpec(base_url=(fake.url,)))
    assert "reasoning_effort" not in plain.body(req) and "chat_template_kwargs" not in plain.body(req)


@dataclass(frozen=True)
class SchemaRequest(GenRequest):
    """A request with the optional ``json_schema`` field (a judge's structured output)."""

    json_schema: dict | None = None


def test_json_schema_becomes_response_format(tiny, fakes):
    fake = fakes()
    b = ServerBackend(str(tiny), "t", ServerSpec(base_url=(fake.url,), model="served"))
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    req = SchemaRequest((5, 6), 1, 32, 7, 0.0, text="<p>", json_schema=schema)
    # OpenAI's spelling, as vLLM 0.32 reads it (vllm/entrypoints/generate/base/protocol.py: ResponseFormat)
    want = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    assert b.body(req) == {
        "model": "served",
        "n": 1,
        "max_tokens": 32,
        "seed": 7,
        "temperature": 0.0,
        "prompt": [5, 6],
        "response_format": want,
        "return_token_ids": True,
    }
    assert b.body(req, plain=True)["response_format"] == want  # standard OpenAI: hosted APIs get it too
    assert "response_format" not in b.body(SchemaRequest((5, 6), 1, 32, 7, 0.0))  # None: no constraint
    assert "response_format" not in b.body(GenRequest((5, 6), 1, 32, 7, 0.0))  # the field absent altogether


# Bodies shaped as vLLM's OpenAI server documents them (vllm/entrypoints/openai/protocol.py).
VLLM_COMPLETIONS = """{"id": "cmpl-8f1e", "object": "text_completion", "created": 1764460800, "model": "tiny",
 "choices": [
  {"index": 1, "text": " 7", "logprobs": null, "finish_reason": "length", "stop_reason": null,
   "token_ids": [40, 41, 42], "prompt_logprobs": null, "prompt_token_ids": [1, 20, 21]},
  {"index": 0, "text": " 9", "logprobs": null, "finish_reason": "stop", "stop_reason": null,
   "token_ids": [30, 2], "prompt_logprobs": null, "prompt_token_ids": [1, 20, 21]}],
 "service_tier": null, "system_fingerprint": null,
 "usage": {"prompt_tokens": 3, "total_tokens": 8, "completion_tokens": 5, "prompt_tokens_details": null},
 "kv_transfer_params": null}"""
VLLM_CHAT = """{"id": "chatcmpl-77", "object": "chat.completion", "created": 1764460800, "model": "tiny",
 "choices": [{"index": 0, "message": {"role": "assistant", "content": "#### 9", "refusal": null,
   "annotations": null, "audio": null, "function_call": null, "tool_calls": [], "reasoning_content": null},
   "logprobs": null, "finish_reason": "stop", "stop_reason": null, "token_ids": [50, 51, 2]}],
 "service_tier": null, "system_fingerprint": null,
 "usage": {"prompt_tokens": 4, "total_tokens": 7, "completion_tokens": 3, "prompt_tokens_details": null},
 "prompt_logprobs": null, "prompt_token_ids": [1, 60, 61, 62], "kv_transfer_params": null}"""
OLD_VLLM_COMPLETIONS = """{"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "tiny",
 "choices": [{"index": 0, "text": "ab", "finish_reason": "length", "stop_reason": null,
   "logprobs": {"text_offset": [0, 1], "token_logprobs": [-0.5, -1.25], "tokens": ["token_id:70", "token_id:71"],
                "top_logprobs": [{"token_id:70": -0.5}, {"token_id:71": -1.25}]}}],
 "usage": {"prompt_tokens": 3, "total_tokens": 5, "completion_tokens": 2}}"""
OLD_VLLM_CHAT = """{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "tiny",
 "choices": [{"index": 0, "message": {"role": "assistant", "content": "ab"}, "finish_reason": "stop",
   "logprobs": {"content": [{"token": "token_id:80", "logprob": -0.1, "bytes": [97], "top_logprobs": []},
                            {"token": "token_id:2", "logprob": -0.2, "bytes": [], "top_logprobs": []}]}}],
 "usage": {"prompt_tokens": 3, "total_tokens": 5, "completion_tokens": 2}}"""
HOSTED_CHAT = """{"id": "chatcmpl-abc", "object": "chat.completion", "created": 1, "model": "gpt-x",
 "choices": [{"index": 0, "message": {"role": "assistant", "content": "The answer is 9", "refusal": null},
   "logprobs": null, "finish_reason": "stop"}],
 "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}, "system_fingerprint": "fp_1"}"""


def test_ids_from_each_response_shape():
    got = parse_response(json.loads(VLLM_COMPLETIONS), 2, chat=False, max_tokens=3, vocab_size=100)
    assert [(c["ids"], c["prompt_ids"], c["text"], c["finish_reason"]) for c in got] == [
        ((30, 2), (1, 20, 21), " 9", "stop"),
        ((40, 41, 42), (1, 20, 21), " 7", "length"),
    ]
    (c,) = parse_response(json.loads(VLLM_CHAT), 1, chat=True, max_tokens=8, vocab_size=100)
    assert (c["ids"], c["prompt_ids"], c["text"]) == ((50, 51, 2), (1, 60, 61, 62), "#### 9")
    assert c["finish_reason"] == "stop"
    (c,) = parse_response(json.loads(OLD_VLLM_COMPLETIONS), 1, chat=False, max_tokens=2, vocab_size=100)
    assert (c["ids"], c["prompt_ids"]) == ((70, 71), None)
    (c,) = parse_response(json.loads(OLD_VLLM_CHAT), 1, chat=True, max_tokens=8, vocab_size=100)
    assert c["ids"] == (80, 2)
    (c,) = parse_response(json.loads(HOSTED_CHAT), 1, chat=True, max_tokens=8, vocab_size=100)
    assert (c["ids"], c["prompt_ids"], c["text"]) == (None, None, "The answer is 9")
    bad = [
        ({"token_ids": [1, "2"]}, 'choice 0 has token_ids[1] "2" (input should be a valid integer)'),
        ({"token_ids": [1, -3]}, "choice 0: token id -3 out of range 0..99"),
        ({"index": 1}, "choice 0 has index 1, not in 0..0"),
        ({"logprobs": {"tokens": ["a"]}}, "choice 0: logprobs token 'a' is not 'token_id:N'"),
    ]
    for change, message in bad:
        body = {"choices": [{"index": 0, "text": "x", "finish_reason": "stop", **change}]}
        with pytest.raises(MindcapError) as exc:
            parse_response(body, 1, chat=False, max_tokens=8, vocab_size=100)
        assert str(exc.value).startswith(message), change
    with pytest.raises(MindcapError, match=r"^the response has no choices$"):
        parse_response({"object": "error"}, 1, chat=False, max_tokens=8, vocab_size=100)


def reply(*choices: dict, **top) -> dict:
    """A completions reply whose choices default to index i, text "x", finish_reason "stop"."""
    return {"choices": [{"index": i, "text": "x", "finish_reason": "stop", **c} for i, c in enumerate(choices)], **top}


def test_stop_at_the_cap_only_when_the_last_id_ends_the_decode():
    """vLLM 0.32 reports ``stop`` with cap ids when EOS is the cap-th token: valid only if that id is a stop id."""
    body = {"choices": [{"index": 0, "text": "", "token_ids": [1, 2, 3, 4], "finish_reason": "stop"}]}
    (c,) = parse_response(body, 1, chat=False, max_tokens=4, vocab_size=100, stops=frozenset({4, 9}))
    assert (c["ids"], c["finish_reason"]) == ((1, 2, 3, 4), "stop")
    with pytest.raises(MindcapError, match="finish_reason 'stop' with 4 of max_tokens 4 tokens"):
        parse_response(body, 1, chat=False, max_tokens=4, vocab_size=100, stops=frozenset({3, 9}))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (reply({}, {}, {"index": True}), "choice 2 has index true (input should be a valid integer)"),
        (reply({}, {}, {"index": 0.5}), "choice 2 has index 0.5 (input should be a valid integer)"),
        (reply({}, {"index": "1"}), 'choice 1 has index "1" (input should be a valid integer)'),
        (reply({}, {"index": None}), "choice 1 has index null (input should be a valid integer)"),
        (reply({}, {"index": 0}), "choices 0 and 1 both have index 0"),
        (reply({}), "1 choice(s) for n = 2: none has index 1"),
        (reply({}, {}, {}), "choice 2 has index 2, not in 0..1"),
        (reply({}, {"token_ids": [5, True]}), "choice 1 has token_ids[1] true (input should be a valid integer)"),
        (reply({}, {"token_ids": [5, 1.0]}), "choice 1 has token_ids[1] 1.0 (input should be a valid integer)"),
        (reply({"token_ids": [2**64]}, {}), "choice 0: token id 18446744073709551616 out of range 0..99"),
        (reply({"token_ids": [2**300]}, {}), "choice 0: token id ~2**300 out of range 0..99"),
        (reply({"token_ids": [100]}, {}), "choice 0: token id 100 out of range 0..99"),
        (reply({"token_ids": [1, 2]}, {"token_ids": [1, 2, 3, 4, 5]}), "choice 1: 5 output ids, above max_tokens 4"),
        (reply({}, {"token_ids": [1, 2], "finish_reason": "length"}), "choice 1: finish_reason 'length' with 2 of"),
        (reply({"token_ids": [1, 2, 3, 4]}, {}), "choice 0: finish_reason 'stop' with 4 of max_tokens 4 tokens"),
        (reply({"finish_reason": "abort"}, {}), "choice 0 has finish_reason \"abort\" (input should be 'stop' or"),
        (reply({"finish_reason": None}, {}), "choice 0 has finish_reason null"),
        (reply({}, {"text": None}), "choice 1 has text null (input should be a valid string)"),
        (reply({}, {}, prompt_token_ids=[1, 100]), "prompt_token_ids: token id 100 out of range 0..99"),
        (reply({}, {"prompt_token_ids": [-1]}), "choice 1: prompt_token_ids: token id -1 out of range 0..99"),
        (reply({"logprobs": {"tokens": ["token_id:\u00b2"]}}, {}), "choice 0: logprobs token 'token_id:\u00b2' is not"),
        ({"choices": [reply({})["choices"][0], "x"]}, 'choice 1 is "x" (not a JSON object)'),
        ([], "the response is [] (not a JSON object)"),
    ],
)
def test_malformed_replies_are_named_in_one_line(body, message):
    """Each rule of the reply schema (n = 2 choices, max_tokens 4, 100 ids), the problem named as written here."""
    with pytest.raises(MindcapError) as exc:
        parse_response(body, 2, chat=False, max_tokens=4, vocab_size=100)
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_chat_replies_follow_the_same_schema():
    ok = {"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": "length", "token_ids": [7]}
    (c,) = parse_response({"choices": [ok]}, 1, chat=True, max_tokens=1, vocab_size=100)
    assert (c["ids"], c["text"], c["finish_reason"]) == ((7,), "", "length")
    for change, message in [
        ({"index": False}, "choice 0 has index false"),
        ({"message": "hi"}, 'choice 0 has message "hi" (not a JSON object)'),
        ({"token_ids": [7, 8]}, "choice 0: 2 output ids, above max_tokens 1"),
        ({"token_ids": None, "logprobs": {"content": [{"token": "token_id:100"}]}}, "choice 0: token id 100 out"),
    ]:
        with pytest.raises(MindcapError) as exc:
            parse_response({"choices": [{**ok, **change}]}, 1, chat=True, max_tokens=1, vocab_size=100)
        assert str(exc.value).startswith(message), change


def test_retry_after_header():
    assert retry_after("2") == 2.0 and retry_after("0.25") == 0.25 and retry_after("-3") == 0.0
    assert retry_after("86400") == 60.0 and retry_after(None) is None and retry_after("soon") is None
    assert retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0


# -- end to end through run_job ------------------------------------------------------------------------------------


def test_two_servers_share_the_job_and_records_match_their_answers(tmp_path, tiny, hf, fakes, config):
    a, b = fakes(), fakes()
    a.delay = b.delay = 0.05
    spec = parse_spec(server_spec(tiny, [a.url, b.url], concurrency=2))
    res = run_job(spec, tmp_path / "led", backend=server_backend(tiny, spec), data_dir=config.data_dir.value)
    assert (res.written, res.records, res.backend) == (4, 12, "server")
    rows = frame(tmp_path / "led")
    check_rows(rows, hf)
    assert {r["generator_version"] for r in rows} == {"vllm 0.0.fake"}
    bodies = a.bodies + b.bodies
    assert len(bodies) == 6 and a.bodies and b.bodies  # one request per prompt, spread over both
    assert {(bd["seed"], bd["n"], bd["max_tokens"], bd["top_k"]) for bd in bodies} == {
        (r["seed"], 2, 12, 20) for r in rows
    }
    assert max(a.max_inflight, b.max_inflight) <= 2
    # resuming through another URL with other connection settings is the same job; another served model is not
    moved = parse_spec(server_spec(tiny, b.url, concurrency=5, timeout_s=3))
    assert (
        run_job(moved, tmp_path / "led", backend=server_backend(tiny, moved), data_dir=config.data_dir.value).skipped
        == 4
    )
    other = parse_spec(server_spec(tiny, b.url, endpoint="chat"))
    with pytest.raises(MindcapError, match="holds a different spec"):
        run_job(other, tmp_path / "led", backend=server_backend(tiny, other), data_dir=config.data_dir.value)


class ShardAtATime:
    """The server backend seen as an in-process backend is: no per-request reports."""

    def __init__(self, inner: ServerBackend) -> None:
        self.inner = inner

    def __getattr__(self, name: str):
        if name == "streams_requests":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def generate(self, requests):
        return self.inner.generate(requests)


class Recorder:
    """``run_job``'s progress callbacks: each ``on_progress`` call with the tokens reported just before it."""

    def __init__(self) -> None:
        self.tokens = 0
        self.events: list[tuple[int, int | None, int]] = []

    def on_tokens(self, tokens: int) -> None:
        self.tokens = tokens

    def on_progress(self, done: int, total: int | None) -> None:
        self.events.append((done, total, self.tokens))


def test_progress_counts_requests_and_output_tokens(tmp_path, tiny, hf, fakes, config):
    fake = fakes()
    spec = parse_spec(server_spec(tiny, fake.url, concurrency=1))
    # the fake server's rule fixes every decode's length, whichever backend path asks
    want_tokens = sum(len(rule(r.seed, j, 12)[0]) for s in plan_job(spec).shards for r in s.requests for j in range(2))
    for label, make, counts in [
        ("per request", lambda: server_backend(tiny, spec), [0, 1, 2, 3, 4, 5, 6]),
        ("per shard", lambda: ShardAtATime(server_backend(tiny, spec)), [0, 2, 3, 5, 6]),  # shards of 2, 1, 2, 1
    ]:
        rec = Recorder()
        led = tmp_path / label
        run_job(
            spec,
            led,
            backend=make(),
            data_dir=config.data_dir.value,
            hooks=JobHooks(on_tokens=rec.on_tokens, on_progress=rec.on_progress),
        )
        assert [(d, t) for d, t, _ in rec.events] == [(c, 6) for c in counts], label
        assert rec.events[-1][2] == want_tokens == sum(r["n_tokens"] for r in frame(led)), label
        seen = [t for *_, t in rec.events]
        assert seen == sorted(seen) and seen[0] == 0 and len(set(seen)) == len(seen), label


def test_concurrency_bounds_requests_in_flight(tmp_path, tiny, hf, fakes, config):
    fake = fakes()
    fake.delay = 0.2
    job = {"items": [0, 1, 2, 3, 4, 5], "langs": ["deu_Latn"], "shard_size": 6, "k": 1}
    spec = parse_spec(server_spec(tiny, fake.url, job, concurrency=2))
    run_job(spec, tmp_path / "led", backend=server_backend(tiny, spec), data_dir=config.data_dir.value)
    assert len(fake.bodies) == 6 and fake.max_inflight == 2


def test_retries_lose_and_duplicate_nothing(tmp_path, tiny, hf, fakes, config):
    fake = fakes()
    fake.faults = ["429", "500", "drop", "slow"]
    spec = parse_spec(server_spec(tiny, fake.url, concurrency=1, timeout_s=0.5))
    b = server_backend(tiny, spec)
    t0 = time.perf_counter()
    res = run_job(spec, tmp_path / "led", backend=b, data_dir=config.data_dir.value)
    assert time.perf_counter() - t0 >= 1.0  # Retry-After: 1 was honoured
    assert res.records == 12 and b.retries == 4 and len(fake.bodies) == 6 + 4
    check_rows(frame(tmp_path / "led"), hf)


def test_retokenized_when_the_server_returns_no_ids(tmp_path, tiny, hf, fakes, config):
    fake = fakes(mode="plain")
    spec = parse_spec(server_spec(tiny, fake.url))
    warnings: list[str] = []
    run_job(
        spec, tmp_path / "led", backend=server_backend(tiny, spec, warn=warnings.append), data_dir=config.data_dir.value
    )
    rows = frame(tmp_path / "led")
    check_rows(rows, hf, retokenized=True)
    assert len(warnings) == 2 and "refused vLLM's request extensions" in warnings[0]
    assert "Unrecognized request argument supplied: return_token_ids" in warnings[0]
    assert "returns no token ids" in warnings[1] and "retokenized = true" in warnings[1]
    sent = [bd for bd in fake.bodies if isinstance(bd["prompt"], str)]
    assert len(sent) == 6 and {bd["prompt"] for bd in sent} == {r["prompt"] for r in rows}


def test_logprob_ids_of_older_servers(tmp_path, tiny, hf, fakes, config):
    fake = fakes(mode="logprobs")
    spec = parse_spec(server_spec(tiny, fake.url, logprob_ids=True))
    run_job(spec, tmp_path / "led", backend=server_backend(tiny, spec), data_dir=config.data_dir.value)
    check_rows(frame(tmp_path / "led"), hf)


def test_chat_endpoint_stores_the_servers_prompt_ids(tmp_path, tiny, hf, fakes, config):
    fake = fakes()
    spec = parse_spec(server_spec(tiny, fake.url, endpoint="chat"))
    run_job(spec, tmp_path / "same", backend=server_backend(tiny, spec), data_dir=config.data_dir.value)
    check_rows(frame(tmp_path / "same"), hf)  # the server's template equals the local one
    assert all(bd["chat_template_kwargs"] == {"enable_thinking": False} for bd in fake.bodies)
    fake.prompt_shift = 1  # a server template that differs: its ids are stored
    run_job(spec, tmp_path / "other", backend=server_backend(tiny, spec), data_dir=config.data_dir.value)
    for r, s in zip(frame(tmp_path / "other"), frame(tmp_path / "same"), strict=True):
        assert r["prompt_ids"] == s["prompt_ids"][1:] and r["prompt"] == decode(hf, s["prompt_ids"][1:], skip=False)
        assert r["output_ids"] == s["output_ids"]


def test_prompt_id_mismatch_is_an_error_naming_the_request(tmp_path, tiny, hf, fakes, config):
    fake = fakes()
    fake.prompt_shift = 1
    spec = parse_spec(server_spec(tiny, fake.url))
    with pytest.raises(MindcapError, match=r"request native/deu_Latn/replay-cap12/00000 item \d: the server's prompt"):
        run_job(spec, tmp_path / "led", backend=server_backend(tiny, spec), data_dir=config.data_dir.value)
    assert not Ledger(tmp_path / "led").exists() or Ledger(tmp_path / "led").read().num_rows == 0


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("400", "answered 400: max_tokens is too large"),
        ("long", "tokens, above the cap 12 (does it serve a model with the job's tokenizer?)"),
    ],
)
def test_a_failed_request_fails_its_shard_at_once_and_resume_completes(
    tmp_path, tiny, hf, fakes, config, fault, message
):
    fake = fakes()
    spec = parse_spec(server_spec(tiny, fake.url, {"shard_size": 3, "langs": ["deu_Latn"]}, concurrency=1))
    b = server_backend(tiny, spec)
    warm = parse_spec(server_spec(tiny, fake.url, {"items": [0], "langs": ["deu_Latn"], "name": "warm"}))
    # once the URL took vLLM's extensions, a 400 is not retried as a plain request
    run_job(warm, tmp_path / "w", backend=b, data_dir=config.data_dir.value)
    fake.faults = [fault, fault]
    with pytest.raises(MindcapError) as exc:
        run_job(spec, tmp_path / "led", backend=b, data_dir=config.data_dir.value)
    assert message in str(exc.value) and "\n" not in str(exc.value) and b.retries == 0
    assert not Ledger(tmp_path / "led").exists() or Ledger(tmp_path / "led").read().num_rows == 0
    fake.faults = []
    assert run_job(spec, tmp_path / "led", backend=b, data_dir=config.data_dir.value).records == 6
    rows = frame(tmp_path / "led")
    assert len(rows) == 6 and len({(r["item"], r["sample"]) for r in rows}) == 6


#: the problem named for each fault that makes a malformed reply
MALFORMED = {
    **{fault: message for fault, (_, message) in TAMPER.items()},
    "garbage": "not JSON (",
    "nested": "JSON nested too deeply to read",
    "abort": """choice 0 has finish_reason "abort" (input should be 'stop' or 'length')""",
}
#: the time a failed request's message says it spent on its attempts
SECONDS = r"[0-9]+\.[0-9] s"


@pytest.mark.parametrize("fault", list(MALFORMED))
def test_a_malformed_reply_is_retried_then_fails_storing_nothing(tmp_path, tiny, hf, fakes, config, fault):
    fake = fakes()
    fake.faults = [fault, fault]
    spec = parse_spec(server_spec(tiny, fake.url, ONE_REQUEST, max_retries=1))
    b = server_backend(tiny, spec)
    with pytest.raises(MindcapError) as exc:
        run_job(spec, tmp_path / "led", backend=b, data_dir=config.data_dir.value)
    message = str(exc.value)
    assert re.match(rf"{re.escape(LABEL)} failed after 2 attempt\(s\) in {SECONDS}: malformed response from ", message)
    assert f": malformed response from {fake.url}: " in message, message
    assert MALFORMED[fault] in message and "\n" not in message
    assert b.retries == 1 and len(fake.bodies) == 2
    assert not Ledger(tmp_path / "led").exists() or Ledger(tmp_path / "led").read().num_rows == 0


def test_an_error_body_nested_deeply_is_named_in_one_cut_line(tmp_path, tiny, hf, fakes, config):
    fake = fakes()
    fake.faults = ["nested-500", "nested-500"]
    spec = parse_spec(server_spec(tiny, fake.url, ONE_REQUEST, max_retries=1))
    with pytest.raises(MindcapError) as exc:
        run_job(spec, tmp_path / "led", backend=server_backend(tiny, spec), data_dir=config.data_dir.value)
    message = str(exc.value)
    assert "failed after 2 attempt(s) in " in message and "\n" not in message and len(message) < 600
    assert message.endswith(f": {fake.url} answered 500: " + '{"error": ' + "[" * (300 - 13) + "...")


def test_a_malformed_reply_then_a_good_one_stores_the_good_one_once(tmp_path, tiny, hf, fakes, config):
    fake = fakes()
    fake.faults = ["index-true"]  # three choices for n = 2 first, then a well-formed answer
    spec = parse_spec(server_spec(tiny, fake.url, ONE_REQUEST, max_retries=1))
    b = server_backend(tiny, spec)
    assert run_job(spec, tmp_path / "led", backend=b, data_dir=config.data_dir.value).records == 2 and b.retries == 1
    rows = frame(tmp_path / "led")
    seed = fake.bodies[1]["seed"]
    assert [(r["sample"], r["output_ids"], r["finish_reason"]) for r in rows] == [
        (j, *rule(seed, j, 12)) for j in range(2)
    ]


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        ("trickle", r"no complete answer from URL within 1 s \(status 200, received [1-3] bytes\)"),
        ("silent", r"no answer from URL within 1 s"),
    ],
)
def test_timeout_is_a_deadline_for_the_whole_request(tmp_path, tiny, hf, fakes, config, fault, problem):
    """A body trickling one byte every 0.5 s (each read well within the timeout) is cut off at timeout_s = 1,
    as is a server that says nothing: two attempts of about a second each, not the trickle's 10 s each."""
    fake = fakes()
    fake.faults = [fault, fault]
    spec = parse_spec(server_spec(tiny, fake.url, ONE_REQUEST, max_retries=1, timeout_s=1))
    b = server_backend(tiny, spec)
    t0 = time.perf_counter()
    with pytest.raises(MindcapError) as exc:
        run_job(spec, tmp_path / "led", backend=b, data_dir=config.data_dir.value)
    elapsed = time.perf_counter() - t0
    assert 2.0 <= elapsed < 4.0, elapsed
    want = (
        re.escape(f"{LABEL} failed after 2 attempt(s) in ")
        + SECONDS
        + ": "
        + problem.replace("URL", re.escape(fake.url))
    )
    assert re.fullmatch(want, str(exc.value)), str(exc.value)
    said = float(re.search(r" in ([0-9.]+) s: ", str(exc.value))[1])  # the time both attempts took, as measured here
    assert 2.0 <= said <= elapsed + 0.05, (said, elapsed)
    assert not Ledger(tmp_path / "led").exists() or Ledger(tmp_path / "led").read().num_rows == 0


def test_wrong_model_name_and_invalid_key(tmp_path, tiny, fakes, config, monkeypatch):
    fake = fakes(key="right")
    monkeypatch.setenv("MINDCAP_TEST_KEY", "wrong")
    spec = parse_spec(server_spec(tiny, fake.url, api_key_env="MINDCAP_TEST_KEY"))
    with pytest.raises(MindcapError, match=r"answered 401: Unauthorized \(check the key in \$MINDCAP_TEST_KEY\)"):
        run_job(spec, tmp_path / "a", backend=server_backend(tiny, spec), data_dir=config.data_dir.value)
    monkeypatch.setenv("MINDCAP_TEST_KEY", "right")
    wrong = parse_spec(server_spec(tiny, fake.url, api_key_env="MINDCAP_TEST_KEY", model="nope"))
    with pytest.raises(MindcapError) as exc:
        run_job(wrong, tmp_path / "b", backend=server_backend(tiny, wrong), data_dir=config.data_dir.value)
    assert "answered 404: The model `nope` does not exist. (is 'nope' the served model name?" in str(exc.value)
    assert (
        run_job(spec, tmp_path / "c", backend=server_backend(tiny, spec), data_dir=config.data_dir.value).records == 12
    )
    assert all(bd["model"] in ("tiny", "nope") for bd in fake.bodies)


def test_unreachable_url_through_the_cli(tmp_path, tiny, capsys, fakes):
    job = tmp_path / "job.toml"
    job.write_text(
        f'name = "t"\nmodel = "{tiny}"\nmodel_name = "tiny-qwen3"\narms = ["native"]\n'
        'langs = ["deu_Latn"]\nitems = [0]\nk = 1\ndesign = "replay"\ncaps = [8]\n'
        '[server]\nmodel = "tiny"\nmax_retries = 2\ntimeout_s = 2\n',
        "utf-8",
    )
    dead = f"http://127.0.0.1:{free_port()}/v1"
    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as exc:
        main(["generate", str(job), "--out-dir", str(tmp_path / "led"), "--base-url", dead])
    assert exc.value.code != 0 and time.perf_counter() - t0 < 10
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: request native/deu_Latn/replay-cap8/00000 item 0 failed after 3")
    assert f"cannot reach {dead} (ConnectError" in err[0]
    with pytest.raises(SystemExit) as exc:
        main(
            ["generate", str(job), "--out-dir", str(tmp_path / "led"), "--backend", "transformers", "--base-url", dead]
        )
    assert exc.value.code != 0 and "--base-url is for the server backend" in capsys.readouterr().err
    fake = fakes(mode="plain")  # and the same job through a live server (text only): one warning line
    with pytest.raises(SystemExit) as exc:
        main(["generate", str(job), "--out-dir", str(tmp_path / "led"), "--base-url", fake.url])
    assert exc.value.code == 0
    captured = capsys.readouterr()
    assert "wrote 1 shards (1 records" in captured.err
    warnings = [line for line in captured.err.splitlines() if "retokenized" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: ")


def job_file(path, tiny, server_lines: str, timeout_s: float = 5) -> None:
    """A one-language, two-request job whose ``[server]`` table holds ``server_lines``."""
    path.write_text(
        f'name = "t"\nmodel = "{tiny}"\nmodel_name = "tiny-qwen3"\narms = ["native"]\n'
        'langs = ["deu_Latn"]\nitems = [0, 1]\nk = 1\ndesign = "replay"\ncaps = [8]\n'
        f"[server]\nmax_retries = 1\ntimeout_s = {timeout_s}\n{server_lines}\n",
        "utf-8",
    )


@pytest.mark.parametrize(
    ("case", "server_lines", "message"),
    [
        (
            "invalid key",
            'model = "tiny"\napi_key_env = "MINDCAP_TEST_KEY"',
            "answered 401: Unauthorized (check the key in $MINDCAP_TEST_KEY)",
        ),
        ("wrong model", 'model = "nope"', "answered 404: The model `nope` does not exist. (is 'nope' the served"),
        ("malformed JSON", 'model = "tiny"', " s: malformed response from URL: not JSON ("),
        ("index true", 'model = "tiny"', "malformed response from URL: choice 1 has index true (input should be"),
        ("trickle", 'model = "tiny"', " s: no complete answer from URL within 1 s (status 200"),
        ("concurrency 0", 'model = "tiny"\nconcurrency = 0', "concurrency: must be an integer in 1..4096, got 0"),
        ("concurrency -3", 'model = "tiny"\nconcurrency = -3', "concurrency: must be an integer in 1..4096, got -3"),
    ],
)
def test_bad_input_through_the_cli(tmp_path, tiny, fakes, capsys, monkeypatch, case, server_lines, message):
    """Each: one line on stderr, a non-zero exit, no record and no temporary file left in the ledger folder."""
    fake = fakes(key="right")
    monkeypatch.setenv("MINDCAP_TEST_KEY", "wrong" if case == "invalid key" else "right")
    faults = {"malformed JSON": "garbage", "index true": "index-true", "trickle": "trickle"}
    if case in faults:  # every attempt of both requests: a body cut off mid-JSON, n + 1 choices, a slow trickle
        fake.faults = [faults[case]] * 4
    job = tmp_path / "job.toml"
    lines = server_lines + ("" if "api_key_env" in server_lines else '\napi_key_env = "MINDCAP_TEST_KEY"')
    job_file(job, tiny, lines, timeout_s=1 if case == "trickle" else 5)
    led = tmp_path / "led"
    with pytest.raises(SystemExit) as exc:
        main(["generate", str(job), "--out-dir", str(led), "--base-url", fake.url])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code not in (0, None) and len(err) == 1 and err[0].startswith("error: "), err
    assert message.replace("URL", fake.url) in err[0]
    if case.startswith("concurrency"):
        assert not led.exists() and not fake.bodies  # refused before anything was sent or written
    else:
        assert fake.bodies  # the server was asked, and refused or garbled the answer
        assert not Ledger(led).exists() or Ledger(led).read().num_rows == 0
        assert not [p for p in led.rglob("*") if p.name.endswith(".tmp")]


# -- servers that hold the connection: every wait bounded by --timeout -------------------------------------------


def stalling_job(path, tiny, items: int) -> None:
    """A one-language job of ``items`` requests, one request in flight per URL, no timeout in the file."""
    path.write_text(
        f'name = "t"\nmodel = "{tiny}"\nmodel_name = "tiny-qwen3"\narms = ["native"]\nlangs = ["deu_Latn"]\n'
        f'items = {list(range(items))}\nk = 1\ndesign = "replay"\ncaps = [8]\n[server]\nmodel = "tiny"\n'
        "concurrency = 1\n",
        "utf-8",
    )


@pytest.mark.parametrize("n_urls", [1, 2])
@pytest.mark.parametrize("mode", ["silent", "trickle"])
def test_a_stalling_server_ends_generate_after_the_timeout(tmp_path, tiny, capsys, mode, n_urls):
    """Servers that accept the connection and never answer (or trickle a byte every 0.1 s, each read well within
    the deadline): eight requests, one slot per URL, --timeout 0.5 and --max-retries 2 end the command after
    three attempts of one request, about 1.5 s plus at most 1.5 s of backoff and a slot's wait per retry (2 URLs),
    in one line naming the URL, the attempts and the time they took; not after the eight requests' attempts
    queued one behind the other (8.5 s measured with retries queued behind first attempts). Nothing is stored."""
    from local_http import Stalling

    servers = [Stalling(mode) for _ in range(n_urls)]
    job, led = tmp_path / "job.toml", tmp_path / "led"
    stalling_job(job, tiny, 8)
    args = ["generate", str(job), "--out-dir", str(led), "--timeout", "0.5", "--max-retries", "2", "--base-url"]
    t0 = time.perf_counter()
    try:
        with pytest.raises(SystemExit) as exc:
            main([*args, *(s.url for s in servers)])
        elapsed = time.perf_counter() - t0
    finally:
        for s in servers:
            s.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    found = re.fullmatch(
        r"error: request native/deu_Latn/replay-cap8/00000 item \d failed after 3 attempt\(s\) in ([0-9.]+) s: "
        r"no answer from (\S+) within 0\.5 s",
        err[0],
    )
    assert found and found[2] in {s.url for s in servers}, err[0]
    assert 1.5 <= float(found[1]) < 6.0 and elapsed < 20, (found[1], elapsed)
    assert not Ledger(led).exists() or Ledger(led).read().num_rows == 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--timeout", "0"], "--timeout: must be a number of seconds > 0, got 0.0"),
        (["--timeout", "nan"], "--timeout: must be a number of seconds > 0, got nan"),
        (["--timeout", "inf"], "--timeout: must be a number of seconds > 0, got inf"),
        (
            ["--timeout", "1", "--max-retries", "0", "--backend", "transformers"],
            "error: --timeout and --max-retries are for the server backend, not transformers",
        ),
    ],
)
def test_generate_refuses_bad_bounds_in_one_line(tmp_path, tiny, capsys, flags, message):
    job, led = tmp_path / "job.toml", tmp_path / "led"
    stalling_job(job, tiny, 1)
    with pytest.raises(SystemExit) as exc:
        main(["generate", str(job), "--out-dir", str(led), *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and message in err[0], err
    assert not led.exists()
