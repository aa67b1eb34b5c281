"""Round trip without a model: MQM worked by hand, judge replies in every shape, the LiT presets, FLORES
paragraphs and samples, text files, spec counts, the bootstrap SE against the binomial SE, the run folder."""

from __future__ import annotations

import json
import math
import random
import time

import numpy as np
import pandas as pd
import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.roundtrip import (
    load_texts,
    mqm_score,
    parse_judge,
    parse_spec,
    passes,
    plan_roundtrip,
    presets,
    resolve_sequences,
    text_bootstrap,
)
from mindcap_tok.roundtrip.prompts import judge_prompt, judge_schema, translation_prompt
from mindcap_tok.roundtrip.sequences import parse_chain
from mindcap_tok.roundtrip.store import HOP_SCHEMA, JUDGE_SCHEMA, RunStore

# -- MQM -------------------------------------------------------------------------------------------------------


def test_mqm_by_hand():
    assert mqm_score(0, 0, 0) == 100.0
    assert mqm_score(3, 0, 0) == 97.0  # 100 - 3
    assert mqm_score(2, 3, 0) == 83.0  # 100 - 2 - 15
    assert mqm_score(0, 4, 0) == 80.0  # exactly the threshold: passes
    assert mqm_score(1, 4, 0) == 79.0  # one point under: fails
    assert mqm_score(0, 0, 1) == 75.0
    assert mqm_score(1, 1, 3) == 19.0  # 100 - 1 - 5 - 75
    assert mqm_score(10, 10, 10) == -210.0  # 100 - 310: raw, not floored (LiT Appendix B)
    assert passes(80.0) and not passes(79.0) and not passes(None)


def _reply(issues, score=90, cls="8-very good"):
    return json.dumps({"score": score, "classification": cls, "issues": issues})


def test_judge_strict_reply_recomputes_mqm():
    issues = [
        {"severity": "minor", "description": "comma"},
        {"severity": "Major", "description": "omission"},
        {"severity": "critical", "description": "hallucination"},
    ]
    j = parse_judge(_reply(issues, score=97))
    assert j.how == "strict"
    assert (j.minor, j.major, j.critical) == (1, 1, 1)
    assert j.mqm == 69.0  # 100 - 1 - 5 - 25, not the judge's own 97
    assert j.judge_score == 97.0 and j.classification == "8-very good" and j.error is None


def test_judge_no_issues_is_perfect_and_tuple_issues_count():
    assert parse_judge(_reply([])).mqm == 100.0
    j = parse_judge(_reply([["major", "wrong tense"], ["major", "dropped clause"]]))
    assert (j.major, j.mqm) == (2, 90.0)


def test_judge_fenced_block():
    text = "Here is my evaluation:\n```json\n" + _reply([{"severity": "major", "description": "x"}]) + "\n```\nDone."
    j = parse_judge(text)
    assert (j.how, j.mqm) == ("fenced", 95.0)


def test_judge_object_embedded_in_prose():
    text = "Sure! " + _reply([{"severity": "minor", "description": "x"}] * 2) + " Hope this helps {not json}"
    j = parse_judge(text)
    assert (j.how, j.mqm) == ("embedded", 98.0)


def test_judge_truncated_reply():
    cut = _reply([{"severity": "critical", "description": "meaning lost"}, {"severity": "minor", "description": "x"}])
    cut = cut[: cut.rindex('"description": "x"') + 14]  # stopped mid-string, like a capped decode
    pytest.importorskip("json_repair")
    j = parse_judge(cut)
    assert j.how == "repaired"
    assert (j.critical, j.minor, j.mqm) == (1, 1, 74.0)


def test_judge_truncated_without_json_repair(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_repair(name, *args, **kw):
        if name == "json_repair":
            raise ImportError(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_repair)
    j = parse_judge('{"score": 50, "issues": [{"severity": "major", "descr')
    assert j.how is None and j.mqm is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"issues": ' + "[" * 5000 + "]" * 5000 + "}", "not read: brackets nested 5001 deep, above the 64 read"),
        ("```json\n" + "{" * 30000 + "\n```", "not read: brackets nested 30000 deep, above the 64 read"),
        ('{"score": 5, "issues": [' + '"' * 20_000, "no JSON object with an issues list"),  # too long to repair
        ('{"issues": [{"severity": "minor", "description": "' + "[" * 8 + "x", "no JSON object with an issues list"),
    ],
)
def test_judge_replies_too_deep_or_too_long_to_repair_are_unparseable_at_once(text, error):
    """No RecursionError, and none of json-repair's minutes on such replies (17 s for 30,000 braces, 10 s for 64
    braces and 8,000 quotes): each is unparseable, saying why, within a second. The last two are past json-repair's
    bounds (8,192 characters, brackets 8 deep even inside strings), though it would read them."""
    t0 = time.perf_counter()
    j = parse_judge(text)
    assert time.perf_counter() - t0 < 1.0
    assert (j.how, j.mqm, j.error) == (None, None, error)
    if error.startswith("no JSON"):
        assert isinstance(pytest.importorskip("json_repair").loads(text)["issues"], list)


def test_judge_replies_within_the_repair_bounds_are_repaired():
    """At the bounds (8 levels, 8,192 characters from the first brace) json-repair still reads a reply."""
    deep = '{"issues": [{"severity": "minor", "description": "' + "[" * 5 + "x"
    assert parse_judge(deep).how == "repaired"
    cut = '{"issues": [{"severity": "major", "description": "' + "y" * (8192 - 50)
    assert len(cut) == 8192 and (parse_judge(cut).how, parse_judge(cut).major) == ("repaired", 1)
    assert parse_judge(cut + "y").how is None


def test_judge_wrong_severities_are_errors_without_penalty():
    issues = [
        {"severity": "blocker", "description": "x"},
        {"severity": "major", "description": "y"},
        {"severity": None, "description": "z"},
    ]
    j = parse_judge(_reply(issues))
    assert j.how == "strict" and j.major == 1 and j.mqm == 95.0
    assert j.bad_severities == ("blocker", "None") and "unknown severities" in j.error


@pytest.mark.parametrize("text", ["", "   \n", "I cannot evaluate this.", '{"score": 80}', "[1, 2]", "```json\n```"])
def test_judge_unparseable_replies(text):
    j = parse_judge(text)
    assert j.how is None and j.mqm is None and j.error


def test_judge_schema_accepts_the_valid_replies_and_rejects_the_bad_ones():
    jsonschema = pytest.importorskip("jsonschema")
    schema = judge_schema()
    valid = [
        _reply([]),
        _reply([{"severity": "minor", "description": "comma"}, {"severity": "critical", "description": "x"}], 12.5),
        json.dumps({"score": 0, "classification": "1-nonsense", "issues": [{"severity": "major", "description": ""}]}),
        _reply([], 100, "6-understandable but Flawed"),
    ]
    for text in valid:
        jsonschema.validate(json.loads(text), schema)
        assert parse_judge(text).how == "strict"
    invalid = [
        _reply([{"severity": "blocker", "description": "x"}]),  # not one of the three severities
        _reply([{"severity": "Major", "description": "x"}]),  # the parser forgives case; the schema does not
        _reply([{"severity": "minor"}]),  # no description
        _reply([["major", "tuple"]]),  # a (severity, description) pair, not an object
        _reply([], "90"),  # score as a string
        _reply([], 90, "8-good"),  # not one of the ten classifications
        json.dumps({"score": 90, "classification": "7-good"}),  # no issues
        json.dumps({"score": 90, "classification": "7-good", "issues": [], "comment": "x"}),  # an extra key
    ]
    for text in invalid:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(text), schema)
    severities = schema["properties"]["issues"]["items"]["properties"]["severity"]["enum"]
    assert severities == ["minor", "major", "critical"]
    assert judge_schema() is not judge_schema()  # a fresh copy: a caller cannot alter the shipped one


def test_judge_structured_switch(config):
    base = {"model": "org/m", "sequences": "en>de>en", "sample": 2}
    on = parse_spec(base, data_dir=config.data_dir.value)
    off = parse_spec({**base, "judge": {"structured": False}}, data_dir=config.data_dir.value)
    assert on.judge.structured and not off.judge.structured
    assert on.identity() != off.identity() and off.as_dict()["judge"]["structured"] is False
    with pytest.raises(MindcapError, match=r"judge\.structured: must be of type bool, got 'yes'"):
        parse_spec({**base, "judge": {"structured": "yes"}}, data_dir=config.data_dir.value)


# -- sequences and prompts ---------------------------------------------------------------------------------------

LIT = {
    "lit:e-asia": ("high", "ja ko zh ru"),
    "lit:c-europe": ("high", "ro hu de pl"),
    "lit:n-east": ("high", "bg el tr fa"),
    "lit:n-europe": ("medium", "is sv fi lt"),
    "lit:se-asia": ("medium", "zh th vi tl"),
    "lit:s-asia": ("medium", "hi ta bn pa"),
    "lit:africa": ("low", "sw ar ha am"),
    "lit:s-america": ("low", "pt quy es gn"),
}
CODES = {
    "ja": "jpn_Jpan",
    "ko": "kor_Hang",
    "zh": "zho_Hans",
    "ru": "rus_Cyrl",
    "ro": "ron_Latn",
    "hu": "hun_Latn",
    "de": "deu_Latn",
    "pl": "pol_Latn",
    "bg": "bul_Cyrl",
    "el": "ell_Grek",
    "tr": "tur_Latn",
    "fa": "pes_Arab",
    "is": "isl_Latn",
    "sv": "swe_Latn",
    "fi": "fin_Latn",
    "lt": "lit_Latn",
    "th": "tha_Thai",
    "vi": "vie_Latn",
    "tl": "tgl_Latn",
    "hi": "hin_Deva",
    "ta": "tam_Taml",
    "bn": "ben_Beng",
    "pa": "pan_Guru",
    "sw": "swh_Latn",
    "ar": "arb_Arab",
    "ha": "hau_Latn",
    "am": "amh_Ethi",
    "pt": "por_Latn",
    "quy": "quy_Latn",
    "es": "spa_Latn",
    "gn": "grn_Latn",
}


def test_presets_are_exactly_the_32_lit_slots(flores_dir):
    table = presets()
    assert list(table) == list(LIT)
    slots = 0
    for name, (resource, langs) in LIT.items():
        chain = table[name]
        assert chain.resource == resource
        assert chain.langs == ("eng_Latn", *(CODES[x] for x in langs.split()), "eng_Latn")
        assert chain.hops == 5
        slots += len(chain.langs) - 2
        for code in chain.langs:
            with open(f"{flores_dir}/devtest/{code}.devtest", encoding="utf-8") as fh:
                assert sum(1 for _ in fh) == 1012
    assert slots == 32
    assert [c.name for c in resolve_sequences(["lit:all"])] == list(LIT)


def test_custom_chains_and_errors():
    chain = parse_chain("en>de>th>en")
    assert chain.langs == ("eng_Latn", "deu_Latn", "tha_Thai", "eng_Latn") and chain.hops == 3
    assert chain.resource == "custom"
    assert resolve_sequences(["lit:africa", "eng_Latn>deu_Latn>eng_Latn", "lit:all"])[0].name == "lit:africa"
    assert len(resolve_sequences(["lit:africa", "lit:all"])) == 8
    for bad in ("en>de", "en>de>th", "en>en>de>en", "lit:mars", "en>>en", "en>xx>en"):
        with pytest.raises(MindcapError):
            resolve_sequences([bad])


def test_prompts_carry_the_paper_wording():
    p = translation_prompt("Hello there.", "eng_Latn", "quy_Latn")
    assert p.startswith("You are a professional translator.\nTask: Translate the SOURCE TEXT from English into Quechua")
    assert "Do not add, omit, or summarize." in p and p.endswith('"Hello there."')
    j = judge_prompt("A cat.", "One cat.")
    assert j.startswith("You are an annotator and expert linguist.")
    assert '{"score": <0-100>' in j and "'critical': Hallucination" in j
    assert j.endswith('Original text:\n"A cat."\nBack-translation:\n"One cat."')


# -- texts -------------------------------------------------------------------------------------------------------


def test_flores_paragraphs_join_consecutive_sentences(flores_dir, config):
    with open(f"{flores_dir}/devtest/eng_Latn.devtest", encoding="utf-8") as fh:
        lines = fh.read().split("\n")[:1012]
    texts = load_texts("flores:devtest", sentences_per_text=3, data_dir=config.data_dir.value)
    assert len(texts) == 337  # floor(1012 / 3)
    assert texts[0].id == "devtest:0-2" and texts[0].text == " ".join(lines[0:3])
    assert texts[336].id == "devtest:1008-1010" and texts[336].text == " ".join(lines[1008:1011])
    assert {t.category for t in texts} == {"wikinews", "wikivoyage", "wikibooks"}
    single = load_texts("flores:devtest", data_dir=config.data_dir.value)
    assert len(single) == 1012 and single[5].id == "devtest:5" and single[5].text == lines[5]


def test_flores_sample_is_seeded_and_in_order(config):
    a = load_texts("flores:dev", sample=20, seed=3, data_dir=config.data_dir.value)
    b = load_texts("flores:dev", sample=20, seed=3, data_dir=config.data_dir.value)
    c = load_texts("flores:dev", sample=20, seed=4, data_dir=config.data_dir.value)
    want = sorted(random.Random(3).sample(range(997), 20))
    assert [t.id for t in a] == [f"dev:{i}" for i in want] == [t.id for t in b]
    assert [t.id for t in a] != [t.id for t in c]
    with pytest.raises(MindcapError, match="there are 997 texts"):
        load_texts("flores:dev", sample=998, data_dir=config.data_dir.value)


def test_text_files(tmp_path):
    jl = tmp_path / "t.jsonl"
    jl.write_text('{"id": 1, "text": "One.", "category": "informal"}\n\n{"id": "b", "text": "Two."}\n', "utf-8")
    texts = load_texts(str(jl))
    assert [(t.id, t.text, t.category) for t in texts] == [("1", "One.", "informal"), ("b", "Two.", "uncategorized")]
    cs = tmp_path / "t.csv"
    cs.write_text('id,text,category\na,"Hello, world.",stem\nb,Bye.,\n', "utf-8")
    assert [(t.id, t.text, t.category) for t in load_texts(str(cs))] == [
        ("a", "Hello, world.", "stem"),
        ("b", "Bye.", "uncategorized"),
    ]
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', "utf-8")
    with pytest.raises(MindcapError, match="duplicate id 'a'") as err:
        load_texts(str(dup))
    assert "\n" not in str(err.value)
    empty = tmp_path / "empty.csv"
    empty.write_text("id,text\na,x\nb,  \n", "utf-8")
    with pytest.raises(MindcapError, match=r"empty.csv:3: text 'b' is empty"):
        load_texts(str(empty))
    (tmp_path / "t.txt").write_text("x")
    with pytest.raises(MindcapError, match=r"use a \.jsonl or \.csv"):
        load_texts(str(tmp_path / "t.txt"))


# -- spec and plan -----------------------------------------------------------------------------------------------


def test_plan_counts_for_lit_all(config):
    spec = parse_spec({"model": "org/m", "sequences": "lit:all", "sample": 200}, data_dir=config.data_dir.value)
    plan = plan_roundtrip(spec)
    assert (plan["texts"], plan["chains"], plan["translation_requests"], plan["judge_requests"]) == (
        200,
        1600,
        8000,
        1600,
    )
    two = parse_spec(
        {"model": ["org/a", "org/b"], "sequences": ["en>de>en", "lit:africa"], "sample": 10},
        data_dir=config.data_dir.value,
    )
    p2 = plan_roundtrip(two)
    assert (p2["chains"], p2["translation_requests"], p2["waves"]) == (40, 2 * 10 * (2 + 5), 5)


def test_spec_errors(config):
    base = {"model": "org/m", "sequences": "lit:all", "sample": 5}
    for bad, msg in [
        ({"max_tokens": 0}, "max_tokens"),
        ({"sample": True}, "sample"),
        ({"colour": 1}, "unknown key"),
        ({"judge": {"retries": -1}}, "judge.retries"),
        ({"sequences": ["en>de>en", "de>en>de"]}, "source"),
        ({"texts": "flores:test"}, "split"),
        ({"backend": "gpu"}, "backend"),
    ]:
        with pytest.raises(MindcapError, match=msg):
            parse_spec({**base, **bad}, data_dir=config.data_dir.value)


# -- bootstrap ---------------------------------------------------------------------------------------------------


def test_bootstrap_se_matches_binomial_se_on_independent_data():
    rng = np.random.default_rng(11)
    n, p = 400, 0.3
    frame = pd.DataFrame({"text_id": [f"t{i}" for i in range(n)], "passed": rng.random(n) < p})
    mean, se, n_texts = text_bootstrap(frame, "passed", seed=1)
    assert n_texts == n
    binomial = math.sqrt(mean * (1 - mean) / n)  # the SE of a mean of independent Bernoulli values
    assert se == pytest.approx(binomial, rel=0.05)


def test_bootstrap_averages_sequences_within_a_text_first():
    # two sequences per text, identical within a text: the SE is that of 300 texts, not 600 samples
    rng = np.random.default_rng(5)
    values = rng.random(300) < 0.5
    frame = pd.DataFrame({"text_id": np.repeat(np.arange(300), 2), "passed": np.repeat(values, 2)})
    mean, se, n = text_bootstrap(frame, "passed", seed=2)
    assert n == 300 and se == pytest.approx(math.sqrt(mean * (1 - mean) / 300), rel=0.06)


# -- the run folder ----------------------------------------------------------------------------------------------


def _run_spec(config, seed: int = 3):
    """A real spec (its identity and dict, as a run stores them): one model, ``en>de>en``, 2 FLORES texts."""
    spec = parse_spec(
        {"model": "org/m", "sequences": ["en>de>en"], "sample": 2, "seed": seed}, data_dir=config.data_dir.value
    )
    return spec.identity(), spec.as_dict()


def test_run_folder_refuses_other_files_and_other_runs(tmp_path, config):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(MindcapError, match="not a round-trip run's"):
        RunStore(tmp_path / "other", *_run_spec(config))
    store = RunStore(tmp_path / "run", *_run_spec(config))
    store.write("hops/hop-01.parquet", [], HOP_SCHEMA)
    assert RunStore(tmp_path / "run", *_run_spec(config)).has("hops/hop-01.parquet")
    with pytest.raises(MindcapError, match="another round-trip run"):
        RunStore(tmp_path / "run", *_run_spec(config, seed=4))


def test_run_folder_reads_back_the_rows_it_wrote(tmp_path, config):
    """Rows go in column by column (nulls, empty and long id lists, non-ASCII text) and come back as written."""
    rows = [
        {
            "model": "m",
            "text_id": "t1",
            "sequence": "s",
            "attempt": 0,
            "judge_model": "j",
            "seed": 2**31 - 1,
            "cap": 9,
            "template_id": "v1:judge",
            "prompt_ids": tuple(range(151_000, 151_300)),
            "output_ids": (),
            "raw": 'ไม่ {"score": 1}',
            "finish_reason": "length",
            "parse": None,
            "mqm": None,
            "judge_score": None,
            "classification": None,
            "n_minor": 0,
            "n_major": 0,
            "n_critical": 0,
            "n_bad_severity": 0,
            "issues": None,
            "error": "truncated",
            "generator": "echo 1",
        },
        {
            "model": "m",
            "text_id": "t2",
            "sequence": "s",
            "attempt": 1,
            "judge_model": "j",
            "seed": 0,
            "cap": 9,
            "template_id": "v1:judge",
            "prompt_ids": (0, 1),
            "output_ids": (5,),
            "raw": "{}",
            "finish_reason": "stop",
            "parse": "strict",
            "mqm": -6.5,
            "judge_score": 90.0,
            "classification": "8-very good",
            "n_minor": 1,
            "n_major": 1,
            "n_critical": 0,
            "n_bad_severity": 2,
            "issues": "[]",
            "error": None,
            "generator": "echo 1",
        },
    ]
    store = RunStore(tmp_path / "run", *_run_spec(config))
    store.write("judge/round-00.parquet", rows, JUDGE_SCHEMA)
    back = RunStore(tmp_path / "run", *_run_spec(config)).read("judge/round-00.parquet")
    assert back == [{**r, "prompt_ids": list(r["prompt_ids"]), "output_ids": list(r["output_ids"])} for r in rows]
