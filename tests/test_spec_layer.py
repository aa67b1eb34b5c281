"""One spec layer: every reader of user configuration refuses the same bad value with the same ``key: problem``.

Readers: the generation job spec, the round-trip spec, their ``[server]`` table, the round-trip ``[judge]``
table and protocol files (for the keys each holds). Expected texts are written out by hand from the rules in
``mindcap_tok/spec.py``; the seeds are recomputed here from their documented formula.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import ValidationError

from mindcap_tok.errors import MindcapError
from mindcap_tok.generation.jobs import parse_spec as parse_job
from mindcap_tok.generation.jobs import request_seed
from mindcap_tok.roundtrip.spec import hop_seed, judge_seed
from mindcap_tok.roundtrip.spec import parse_spec as parse_roundtrip
from mindcap_tok.spec import MAX_CAP, Sampling, ServerSpec
from mindcap_tok.stats.protocol import load_protocol

JOB = {"model": "Qwen/Qwen3-8B", "arms": ["native"], "langs": ["de"], "items": [0], "k": 1, "design": "replay"}
PROTOCOL = 'name = "p"\n[[hypotheses]]\nid = "H1"\nkind = "delta"\nlangs = ["de"]\nbudget = 64\n'


@pytest.fixture
def texts(tmp_path):
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"id": f"t{i}", "text": f"Text {i}."}) + "\n" for i in range(3)), "utf-8")
    return str(path)


def _job(change: dict) -> None:
    parse_job({**JOB, **change}, source="job.toml")


def _server(change: dict) -> None:
    parse_job({**JOB, "server": {"base_url": "http://h:8000/v1", **change}}, source="job.toml")


def _refusal(read, change: dict) -> str:
    with pytest.raises(MindcapError) as err:
        read(change)
    message = str(err.value)
    assert "\n" not in message
    return message


# (value, problem), then where each reader holds the key; None: the reader has no such key
BAD = [
    ({"top_p": 5.0}, "must be in (0, 1], got 5.0"),
    ({"top_p": 0}, "must be in (0, 1], got 0.0"),
    ({"top_k": -5}, "must be -1 (no top-k) or in 1..2147483647, got -5"),
    ({"top_k": 0}, "must be -1 (no top-k) or in 1..2147483647, got 0"),
    # past a C int (top_k) and a C long (seed): an engine would end in a raw OverflowError
    ({"top_k": 2**31}, f"must be -1 (no top-k) or in 1..2147483647, got {2**31}"),
    ({"temperature": -1}, "must be >= 0, got -1.0"),
    ({"cap": 0}, f"must be an integer in 1..{MAX_CAP}, got 0"),
    ({"cap": 2**31}, f"must be an integer in 1..{MAX_CAP}, got {2**31}"),
    ({"seed": -1}, f"must be an integer in 0..{2**63 - 1}, got -1"),
    ({"seed": 2**63}, f"must be an integer in 0..{2**63 - 1}, got {2**63}"),
    ({"seed": True}, "must be of type int, got true"),
    ({"seed": 1.5}, "must be of type int, got 1.5"),
    ({"model": ""}, "must not be empty"),
]
SAMPLING = {"top_p", "top_k", "temperature"}


def _job_key(name: str) -> str:
    return f"sampling.{name}" if name in SAMPLING else {"cap": "caps"}.get(name, name)


def _rt_key(name: str) -> str:
    return f"sampling.{name}" if name in SAMPLING else {"cap": "max_tokens"}.get(name, name)


def _nest(key: str, value: object) -> dict:
    """``{"sampling.top_p": 5}`` as a nested table."""
    head, _, tail = key.partition(".")
    return {head: _nest(tail, value)} if tail else {key: value}


@pytest.mark.parametrize(("bad", "problem"), BAD, ids=[f"{k}={v!r}" for (b, _) in BAD for k, v in b.items()])
def test_every_reader_refuses_a_bad_value_alike(tmp_path, texts, bad, problem):
    ((name, value),) = bad.items()
    rt_base = {"model": "org/m", "sequences": "en>de>en", "texts": texts}

    def roundtrip(change):
        parse_roundtrip({**rt_base, **change}, source="rt.toml")

    def judge(change):
        parse_roundtrip({**rt_base, "judge": change}, source="rt.toml")

    def protocol(change):
        path = tmp_path / "p.toml"
        path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in change.items()) + PROTOCOL, "utf-8")
        load_protocol(path)

    seen = [
        (_refusal(_job, _nest(_job_key(name), value)), f"job.toml: {_job_key(name)}: {problem}"),
        (_refusal(roundtrip, _nest(_rt_key(name), value)), f"rt.toml: {_rt_key(name)}: {problem}"),
    ]
    judge_key = {"cap": "max_tokens"}.get(name, name)
    if name != "seed":  # the judge has no seed of its own
        seen.append((_refusal(judge, {judge_key: value}), f"rt.toml: judge.{judge_key}: {problem}"))
    if name == "model":
        seen.append((_refusal(_server, {"model": value}), f"job.toml: server.model: {problem}"))
    if name in ("seed", "model"):
        path = tmp_path / "p.toml"
        seen.append((_refusal(protocol, {name: value}), f"{path}: {name}: {problem}"))
    for got, want in seen:
        assert got == want
    assert len(seen) >= 3


def test_a_cap_in_every_place_of_a_job_follows_one_rule():
    for change, key in [
        ({"caps": [64, 0]}, "caps[1]"),
        ({"forcing": {"max_tokens": 0}}, "forcing.max_tokens"),
        ({"design": "announcement", "announce": {"budgets": [0]}}, "announce.budgets[0]"),
    ]:
        assert _refusal(_job, change) == f"job.toml: {key}: must be an integer in 1..{MAX_CAP}, got 0"


def test_every_reader_refuses_an_unknown_key_alike(tmp_path, texts):
    rt_base = {"model": "org/m", "sequences": "en>de>en", "texts": texts}
    path = tmp_path / "p.toml"
    path.write_text("colour = 1\n" + PROTOCOL, "utf-8")
    got = [
        (_refusal(_job, {"colour": 1}), "job.toml: colour"),
        (_refusal(_job, {"sampling": {"colour": 1}}), "job.toml: sampling.colour"),
        (_refusal(_server, {"colour": 1}), "job.toml: server.colour"),
        (_refusal(lambda c: parse_roundtrip({**rt_base, **c}, source="rt.toml"), {"colour": 1}), "rt.toml: colour"),
        (
            _refusal(lambda c: parse_roundtrip({**rt_base, "judge": c}, source="rt.toml"), {"colour": 1}),
            "rt.toml: judge.colour",
        ),
        (_refusal(lambda c: load_protocol(path), {}), f"{path}: colour"),
    ]
    for message, where in got:
        assert message.startswith(f"{where}: unknown key; known: "), message


def test_a_server_spec_built_in_code_follows_the_table_rules():
    table = _refusal(_server, {"concurrency": 0})
    with pytest.raises(MindcapError) as err:
        ServerSpec(base_url=("http://h:8000/v1",), concurrency=0)
    assert table == f"job.toml: {err.value}" == "job.toml: server.concurrency: must be an integer in 1..4096, got 0"


# a key's place in the file: a list's element by its index, a single value standing for a list of one without
KEY_PLACES = [
    ({"items": [0, -1]}, "items[1]: must be an integer >= 0, got -1"),
    ({"items": 5}, "items: must be 'all', a list of item indices or {sample = N, seed = S}, got 5"),
    ({"items": "some"}, "items: must be 'all', a list of item indices or {sample = N, seed = S}, got 'some'"),
    ({"items": {"sample": 2, "colour": 1}}, "items.colour: unknown key; known: sample, seed"),
    ({"caps": 0}, f"caps: must be an integer in 1..{MAX_CAP}, got 0"),
    ({"arms": 5}, "arms: must be of type string, got 5"),
    ({"arms": ["native", 5]}, "arms[1]: must be of type string, got 5"),
    ({"premiums": {"de": -1}}, "premiums.de: must be > 0, got -1.0"),
    (
        {"server": {"base_url": ["http://h:8000/v1", "h"]}},
        "server.base_url[1]: must be an http:// or https:// URL (e.g. http://localhost:8000/v1), got 'h'",
    ),
    (
        {"server": {"base_url": "h"}},
        "server.base_url: must be an http:// or https:// URL (e.g. http://localhost:8000/v1), got 'h'",
    ),
    ({"forcing": {"enabled": "false"}}, "forcing.enabled: must be of type bool, got 'false'"),
]


@pytest.mark.parametrize(("change", "problem"), KEY_PLACES, ids=[str(c) for c, _ in KEY_PLACES])
def test_a_refusal_names_the_place_of_the_key(change, problem):
    assert _refusal(_job, change) == f"job.toml: {problem}"


def test_a_judge_in_a_list_is_named_by_its_index(texts):
    base = {"model": "org/m", "sequences": "en>de>en", "texts": texts}
    judges = [{"model": "org/a"}, {"model": "org/b", "top_k": 0}]
    got = _refusal(lambda c: parse_roundtrip({**base, **c}, source="rt.toml"), {"judge": judges})
    assert got == "rt.toml: judge[1].top_k: must be -1 (no top-k) or in 1..2147483647, got 0"


def test_an_int_setting_of_a_float_key_is_stored_as_written():
    job = parse_job({**JOB, "sampling": {"temperature": 1, "top_p": 0.5}})
    assert json.dumps(job.as_dict()["sampling"]) == '{"temperature": 1, "top_p": 0.5, "top_k": 20}'


def test_spec_types_are_frozen():
    job = parse_job(JOB)
    with pytest.raises(ValidationError):
        job.sampling.top_p = 0.5  # type: ignore[misc]  # the assignment under test


def _sampling(temperature: float, top_p: float, top_k: int) -> Sampling:
    return Sampling(temperature=temperature, top_p=top_p, top_k=top_k)


def _hash31(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF


def test_good_specs_parse_as_before(texts):
    sampling = {"temperature": 1, "top_p": 0.9, "top_k": -1}
    job = parse_job({**JOB, "seed": 7, "caps": 512, "sampling": sampling})
    assert (job.model_name, job.seed, job.caps, job.sampling) == ("qwen3-8b", 7, (512,), _sampling(1, 0.9, -1))
    assert request_seed(job, "native", lang="deu_Latn", cap=512, announced=None, item=0) == _hash31(
        "7|qwen3-8b|native|deu_Latn|replay|512|None|0"
    )
    rt = parse_roundtrip(
        {
            "model": "Qwen/Qwen3-8B",
            "sequences": "en>de>en",
            "texts": texts,
            "seed": 7,
            "max_tokens": 512,
            "sampling": sampling,
            "judge": {"top_k": 5},
        }
    )
    assert (rt.models[0].name, rt.seed, rt.max_tokens, rt.sampling) == ("qwen3-8b", 7, 512, _sampling(1, 0.9, -1))
    assert rt.judge.sampling == _sampling(0.6, 0.95, 5) and (rt.judge.max_tokens, rt.judge.retries) == (1024, 2)
    assert hop_seed(rt, "qwen3-8b", "t0", "en>de>en", 1) == _hash31("7\x1fqwen3-8b\x1ft0\x1fen>de>en\x1f1")
    assert judge_seed(rt, "m", "t0", "s", 0) == _hash31("7\x1fjudge\x1fm\x1ft0\x1fs\x1f0")
    defaults = parse_job(JOB)
    assert (defaults.sampling, defaults.seed, defaults.server) == (_sampling(0.6, 0.95, 20), 0, None)
    server = parse_job({**JOB, "server": {"base_url": "http://h:8000/v1/", "timeout_s": 5, "model": "served"}}).server
    assert server == ServerSpec(base_url=("http://h:8000/v1",), timeout_s=5.0, model="served")


# the protocol file's own keys: (key = value as TOML writes it, problem), each worked from the rules by hand
PROTOCOL_BAD = [
    ("alpha = 0", "must be in (0, 1), got 0.0"),
    ("alpha = 1.0", "must be in (0, 1), got 1.0"),
    ('alpha = "0.05"', "must be of type float (finite), got '0.05'"),
    ("alpha = true", "must be of type float (finite), got true"),
    ("n_boot = 1", "must be an integer in 2..1000000, got 1"),
    ("n_boot = 1000001", "must be an integer in 2..1000000, got 1000001"),
    ("n_boot = 2000.0", "must be of type int, got 2000.0"),
    ('n_boot = "2000"', "must be of type int, got '2000'"),
    ("tail_factor = 0.5", "must be >= 1, got 0.5"),
    ("tail_factor = nan", "must be of type float (finite), got nan"),
    ('tail_factor = "1.3"', "must be of type float (finite), got '1.3'"),
]


@pytest.mark.parametrize(("line", "problem"), PROTOCOL_BAD, ids=[line for line, _ in PROTOCOL_BAD])
def test_protocol_keys_are_refused_in_one_line_naming_file_and_key(tmp_path, line, problem):
    path = tmp_path / "p.toml"
    path.write_text(line + "\n" + PROTOCOL, "utf-8")
    key = line.split(" = ")[0]
    assert _refusal(lambda c: load_protocol(path), {}) == f"{path}: {key}: {problem}"


def test_protocol_keys_in_range_parse_as_before(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text("alpha = 0.01\nn_boot = 200\ntail_factor = 2\n" + PROTOCOL, "utf-8")
    proto = load_protocol(path)
    assert (proto.alpha, proto.n_boot, proto.tail_factor) == (0.01, 200, 2.0)


# a hypothesis's keys: each refusal names the file and the hypothesis (worked from the rules by hand)
HYPOTHESIS_BAD = [
    ('margin = "5"', "hypothesis H1: margin: must be of type float (finite), got '5'"),
    ("margin = nan", "hypothesis H1: margin: must be of type float (finite), got nan"),
    ("other_budget = 1.5", "hypothesis H1: other_budget: must be of type int, got 1.5"),
    ("other_budget = true", "hypothesis H1: other_budget: must be of type int, got true"),
    ("colour = 1", "hypothesis H1: unknown key(s) colour"),
]


@pytest.mark.parametrize(("line", "problem"), HYPOTHESIS_BAD, ids=[line for line, _ in HYPOTHESIS_BAD])
def test_hypothesis_keys_are_refused_in_one_line_naming_the_file(tmp_path, line, problem):
    path = tmp_path / "p.toml"
    path.write_text(PROTOCOL + line + "\n", "utf-8")
    assert _refusal(lambda c: load_protocol(path), {}) == f"{path}: {problem}"


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("Qwen/Qwen3-8B", "qwen3-8b"),  # the registry model's own hub id
        ("qwen/qwen3-8b", "qwen3-8b"),  # the hub reads ids in any case
        ("qwen3", "qwen3-8b"),  # an alias
        ("evil-org/qwen3-8b", "evil-org/qwen3-8b"),  # another organisation's copy keeps its id, as imports store it
        ("someone/my-model", "someone/my-model"),
    ],
)
def test_generation_names_models_by_the_import_rule(model, name):
    assert parse_job(dict(JOB, model=model)).model_name == name


def test_a_local_folder_is_named_by_its_folder(tmp_path):
    (tmp_path / "Qwen3-8B").mkdir()
    (tmp_path / "tiny").mkdir()
    assert parse_job(dict(JOB, model=str(tmp_path / "Qwen3-8B"))).model_name == "qwen3-8b"
    assert parse_job(dict(JOB, model=str(tmp_path / "tiny") + "/")).model_name == "tiny"
