"""Blind LLM adjudication of language-ID labels: replies read by hand, the stratified sample's sizes by hand, and
a real local OpenAI-compatible judge whose answers are known (some deliberately wrong), so every agreement count
is known by hand (Wilson intervals against statsmodels); the CLI end to end; the transformers backend once."""

from __future__ import annotations

import json
import re
import time

import pandas as pd
import pytest

from mindcap_tok.audits.langid import validation_sample
from mindcap_tok.audits.lid_adjudication import (
    LidJudge,
    adjudicate,
    adjudication_sample,
    judge_prompt,
    parse_language,
)

proportion = pytest.importorskip("statsmodels.stats.proportion")


@pytest.mark.parametrize(
    ("reply", "how", "code"),
    [
        ('{"language": "tha_Thai"}', "strict", "tha_Thai"),
        ('```json\n{"language": "German"}\n```', "fenced", "deu_Latn"),
        ('Sure: {"language": "sw"} is my answer', "embedded", "swh_Latn"),
        ('{"language": "swc_Latn"', "repaired", "swc_Latn"),
        ("Thai", "plain", "tha_Thai"),
        ('"English".', "plain", "eng_Latn"),
        ("The text is written in Thai (tha_Thai), I am sure of it.", "code-in-text", "tha_Thai"),
        ("I cannot tell.", None, None),
        ('{"language": "Klingon"}', None, None),
        ("", None, None),
        ("Either eng_Latn or deu_Latn, it is hard to say.", None, None),
    ],
)
def test_replies_are_read_by_hand(reply, how, code):
    got = parse_language(reply)
    assert (got.how, got.code) == (how, code)
    assert (got.error is None) == (how is not None)


def _labels(rows: list[tuple[str, str, str, str]]) -> pd.DataFrame:
    """A label_traces table from (arm, lang, predicted, status) rows; trace i's segment names it (``trace-i``)."""
    expected = {"native": None, "translate-act": "eng_Latn"}
    return pd.DataFrame(
        [
            {
                "model": "m",
                "arm": arm,
                "lang": lang,
                "item": i,
                "sample": 0,
                "expected": expected[arm] or lang,
                "segment": f"trace-{i} words of the reasoning",
                "predicted": pred,
                "confidence": 0.9,
                "status": status,
            }
            for i, (arm, lang, pred, status) in enumerate(rows)
        ]
    )


def test_stratified_sample_sizes_by_hand():
    # native/deu: 5 determinate + 2 short; native/tha: 2 determinate; translate-act/tha: 8 determinate + 1 low
    rows = [("native", "deu_Latn", "deu_Latn", "determinate")] * 5 + [("native", "deu_Latn", "und", "short")] * 2
    rows += [("native", "tha_Thai", "tha_Thai", "determinate")] * 2
    rows += [("translate-act", "tha_Thai", "eng_Latn", "determinate")] * 8
    rows += [("translate-act", "tha_Thai", "eng_Latn", "low-confidence")]
    labels = _labels(rows)
    sample = adjudication_sample(labels, 3, seed=5)
    sizes = sample.groupby(["arm", "lang"]).size().to_dict()
    assert sizes == {("native", "deu_Latn"): 3, ("native", "tha_Thai"): 2, ("translate-act", "tha_Thai"): 3}
    assert (sample["status"] == "determinate").all() and sample["item"].is_unique
    # the human validation sample's draw: same seed and size, same traces
    assert sample["item"].tolist() == validation_sample(labels, 3, seed=5)["item"].tolist()
    assert sample["item"].tolist() == adjudication_sample(labels, 3, seed=5)["item"].tolist()
    assert len(adjudication_sample(labels, 20, seed=5)) == 5 + 2 + 8


#: trace -> (automated label, the judge's reply); the hand count per cell is in the test
JUDGED = {
    0: ("native", "deu_Latn", "deu_Latn", '{"language": "deu_Latn"}'),  # agrees
    1: ("native", "deu_Latn", "deu_Latn", "German"),  # agrees (a name)
    2: ("native", "deu_Latn", "deu_Latn", '{"language": "eng_Latn"}'),  # wrong
    3: ("native", "deu_Latn", "deu_Latn", "no idea, sorry"),  # unparseable
    4: ("native", "swh_Latn", "swh_Latn", "swc_Latn"),  # exact no, macro yes
    5: ("native", "swh_Latn", "swh_Latn", '{"language": "Swahili"}'),  # agrees
    6: ("native", "swh_Latn", "swh_Latn", '```json\n{"language": "sw"}\n```'),  # agrees
    7: ("translate-act", "tha_Thai", "eng_Latn", '{"language": "English"}'),  # agrees
    8: ("translate-act", "tha_Thai", "eng_Latn", '{"language": "tha_Thai"}'),  # wrong
}


class Judge:
    """A real local OpenAI-compatible server; ``answer(prompt text)`` is its reply. Keeps every request body."""

    def __init__(self, tiny, answer) -> None:
        pytest.importorskip("httpx", reason="the server backend needs the server extra (httpx)")
        from transformers import AutoTokenizer

        from local_http import LocalHTTP

        self.hf, self.bodies, self.prompts = AutoTokenizer.from_pretrained(tiny), [], []

        def post(h, raw: bytes) -> None:
            body = json.loads(raw)
            prompt = body["prompt"] if isinstance(body["prompt"], str) else self.hf.decode(body["prompt"])
            self.bodies.append(body)
            self.prompts.append(prompt)
            choices = [{"index": i, "text": answer(prompt), "finish_reason": "stop"} for i in range(body["n"])]
            h.reply(200, {"choices": choices})

        self.server = LocalHTTP(lambda h: h.reply(404, {"error": {"message": "Not Found"}}), post)
        self.url = self.server.url


def test_agreement_against_a_local_judge_with_known_answers(tiny):
    from mindcap_tok.generation.backends import load_backend
    from mindcap_tok.spec import ServerSpec

    labels = _labels([(a, lang, p, "determinate") for a, lang, p, _ in JUDGED.values()])
    labels = pd.concat([labels, _labels([("native", "deu_Latn", "und", "short")]).assign(item=99)], ignore_index=True)
    fake = Judge(tiny, lambda prompt: JUDGED[int(re.search(r"trace-(\d+)", prompt).group(1))][3])
    try:
        backend = load_backend("server", str(tiny), tokenizer_name="tiny", server=ServerSpec(base_url=(fake.url,)))
        tables, summary = adjudicate(labels, LidJudge(backend, "judge-x"), seed=4)
    finally:
        fake.server.close()
    # blind: each trace once (the short one never), the prompt is the template around the segment only
    assert len(fake.prompts) == 9 and all("response_format" in b for b in fake.bodies)
    for prompt in fake.prompts:
        i = int(re.search(r"trace-(\d+)", prompt).group(1))
        assert judge_prompt(f"trace-{i} words of the reasoning") in prompt
        assert not any(w in prompt for w in ("deu_Latn", "swh_Latn", "tha_Thai", "eng_Latn", "German", "native"))
    cells = tables["adjudication"].set_index(["arm", "lang"])
    by_hand = {  # sampled, parsed, unparseable, agree, agree_macro
        ("native", "deu_Latn"): (4, 3, 1, 2, 2),
        ("native", "swh_Latn"): (3, 3, 0, 2, 3),
        ("translate-act", "tha_Thai"): (2, 2, 0, 1, 1),
    }
    for cell, want in by_hand.items():
        row = cells.loc[cell]
        assert tuple(row[["sampled", "parsed", "unparseable", "agree", "agree_macro"]]) == want
        _check_wilson(row, want[3], want[4], want[1])
    pooled = tables["adjudication_pooled"].iloc[0]
    assert tuple(pooled[["sampled", "parsed", "unparseable", "agree", "agree_macro"]]) == (9, 8, 1, 5, 6)
    _check_wilson(pooled, 5, 6, 8)
    off = tables["adjudication_disagreements"].set_index("item")
    assert sorted(off.index) == [2, 3, 4, 8]
    assert off.loc[4, "agree_macro"] and not off.loc[2, "agree_macro"] and pd.isna(off.loc[3, "parse"])
    assert off.loc[8, "judge_label"] == "tha_Thai" and off.loc[2, "reply"] == '{"language": "eng_Latn"}'
    assert summary["seed"] == 4 and summary["judge_model"] == "judge-x" and summary["prompt"] == "lid-judge-v1"
    assert summary["agreement"] == 5 / 8 and summary["agreement_macro"] == 6 / 8 and len(summary["prompt_sha256"]) == 64


def _check_wilson(row, agree: int, macro: int, parsed: int) -> None:
    for hits, name in ((agree, "agreement"), (macro, "agreement_macro")):
        want = proportion.proportion_confint(hits, parsed, alpha=0.05, method="wilson")
        assert (row[f"{name}_low"], row[f"{name}_high"]) == pytest.approx(want)
        assert row[name] == hits / parsed


# -- the CLI on a real ledger with real LID labels ---------------------------------------------------------------


@pytest.fixture(scope="module")
def ledger_dir(config, qwen, tmp_path_factory):
    pytest.importorskip("fasttext", reason="needs the lid extra")
    from ledger_factory import make_record
    from mindcap_tok.store.ledger import Ledger

    def flores(code: str) -> list[str]:
        path = config.data_dir.value / "flores200" / "dev" / f"{code}.dev"
        return path.read_text("utf-8").splitlines()[:4]

    recs = [make_record(qwen, t, lang="deu_Latn", item=i) for i, t in enumerate(flores("deu_Latn"))]
    recs += [make_record(qwen, t, lang="tha_Thai", item=i) for i, t in enumerate(flores("tha_Thai"))]
    path = tmp_path_factory.mktemp("lid") / "L"
    Ledger(path).append(recs, qwen)
    return path


def _audit(ledger_dir, out, *flags: str, only: str = "langid"):
    from click.testing import CliRunner

    from mindcap_tok.cli.main import cli

    args = ["audit", "--ledger", str(ledger_dir), "--out-dir", str(out), "--only", only, "--no-hub", *flags]
    return CliRunner().invoke(cli, args)


def test_cli_adjudicates_with_a_server_judge(ledger_dir, tiny, tmp_path):
    # the judge calls every Thai trace Thai and every German one English: 2 of 2 and 0 of 2 per cell
    fake = Judge(tiny, lambda p: "Thai" if re.search("[\u0e00-\u0e7f]", p) else '{"language": "eng_Latn"}')
    try:
        res = _audit(
            ledger_dir,
            tmp_path / "a",
            "--adjudicate",
            "--judge-model",
            str(tiny),
            "--judge-base-url",
            fake.url,
            "--adjudicate-n",
            "2",
            "--seed",
            "3",
        )
    finally:
        fake.server.close()
    assert res.exit_code == 0, res.output
    assert len(fake.prompts) == 4
    langid = json.loads((tmp_path / "a" / "audit.json").read_text("utf-8"))["audits"][0]
    judged = langid["summary"]["adjudication"]
    assert (judged["seed"], judged["judge_model"], judged["agree"], judged["parsed"]) == (3, str(tiny), 2, 4)
    cells = {r["lang"]: (r["agree"], r["parsed"]) for r in langid["tables"]["adjudication"]}
    assert cells == {"deu_Latn": (0, 2), "tha_Thai": (2, 2)}
    assert [r["judge_label"] for r in langid["tables"]["adjudication_disagreements"]] == ["eng_Latn"] * 2
    report = (tmp_path / "a" / "audit.md").read_text("utf-8")
    low, high = proportion.proportion_confint(2, 4, method="wilson")
    assert f"judge {tiny} agrees on 50.0% of 4 (macro, Wilson [{100 * low:.1f}%, {100 * high:.1f}%]" in report
    assert "### adjudication_disagreements" in report


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--adjudicate"], "--adjudicate needs --judge-model"),
        (["--judge-model", "org/m"], "--judge-model only apply with --adjudicate"),
        (["--adjudicate", "--judge-model", "org/m", "--adjudicate-n", "0"], "--adjudicate-n must be at least 1"),
        (["--adjudicate", "--judge-model", "org/m", "--judge-backend", "server"], "needs --judge-base-url"),
    ],
)
def test_cli_bad_judge_options_are_one_line_errors(ledger_dir, tmp_path, flags, message):
    res = _audit(ledger_dir, tmp_path / "x", *flags)
    assert res.exit_code != 0 and message in res.output and "Traceback" not in res.output
    assert not (tmp_path / "x").exists()


def test_cli_adjudicate_needs_the_langid_audit(ledger_dir, tmp_path):
    res = _audit(ledger_dir, tmp_path / "x", "--adjudicate", "--judge-model", "org/m", only="parser")
    assert res.exit_code != 0 and "include langid in --only" in res.output and "Traceback" not in res.output


@pytest.mark.slow
def test_transformers_judge_with_the_tiny_model_runs_end_to_end(ledger_dir, tiny, tmp_path):
    """The tiny model's replies are noise: only that the run completes and unparseable replies are counted."""
    res = _audit(
        ledger_dir,
        tmp_path / "t",
        "--adjudicate",
        "--judge-model",
        str(tiny),
        "--judge-backend",
        "transformers",
        "--adjudicate-n",
        "1",
    )
    assert res.exit_code == 0, res.output
    langid = json.loads((tmp_path / "t" / "audit.json").read_text("utf-8"))["audits"][0]
    judged = langid["summary"]["adjudication"]
    assert judged["sampled"] == 2 and judged["parsed"] + judged["unparseable"] == 2
    assert judged["judge_backend"].startswith("transformers")
    unparsed = [r for r in langid["tables"]["adjudication_disagreements"] if r["judge_label"] is None]
    assert len(unparsed) == judged["unparseable"] and all(r["error"] for r in unparsed)


# -- judges that nest too deeply or never answer -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("[" * 5000 + "]" * 5000, "not read: brackets nested 5000 deep, above the 64 read"),
        ('{"language": ' * 3000 + '"tha_Thai"' + "}" * 3000, "not read: brackets nested 3000 deep, above the 64 read"),
        ("{" * 30000, "not read: brackets nested 30000 deep, above the 64 read"),
        ("{" + "x" * 100_000, "no language in the reply"),  # too long for json-repair: read by the others only
    ],
)
def test_replies_nested_too_deeply_or_too_long_to_repair_are_unparseable_at_once(reply, error):
    """No RecursionError and no minutes in json-repair (17 s for the 30,000 braces): each is unparseable, saying
    why, within a second."""
    t0 = time.perf_counter()
    got = parse_language(reply)
    assert time.perf_counter() - t0 < 1.0
    assert (got.how, got.code, got.error) == (None, None, error)


def test_a_judge_whose_replies_nest_too_deeply_leaves_them_unparseable(tiny):
    """Through a real local judge server: every reply is 5,000 brackets deep; the adjudication completes, each
    trace unparseable with the reason in its row, none in any agreement's denominator."""
    from mindcap_tok.generation.backends import load_backend
    from mindcap_tok.spec import ServerSpec

    labels = _labels([(a, lang, p, "determinate") for a, lang, p, _ in JUDGED.values()])
    fake = Judge(tiny, lambda prompt: "[" * 5000 + "]" * 5000)
    try:
        backend = load_backend("server", str(tiny), tokenizer_name="tiny", server=ServerSpec(base_url=(fake.url,)))
        tables, summary = adjudicate(labels, LidJudge(backend, "judge-x", max_tokens=12_000), seed=4)
    finally:
        fake.server.close()
    assert len(fake.prompts) == 9 and (summary["sampled"], summary["parsed"], summary["unparseable"]) == (9, 0, 9)
    off = tables["adjudication_disagreements"]
    assert len(off) == 9 and set(off["error"]) == {"not read: brackets nested 5000 deep, above the 64 read"}


@pytest.mark.parametrize("mode", ["silent", "trickle"])
def test_cli_a_stalling_judge_server_ends_the_audit_after_the_timeout(ledger_dir, tiny, tmp_path, mode):
    """A judge server that accepts the connection and never answers (or trickles a byte every 0.1 s): --timeout
    0.5 and --max-retries 0 end the audit after one attempt of about 0.5 s, in one line naming the URL; no
    report is written."""
    pytest.importorskip("httpx", reason="the server backend needs the server extra (httpx)")
    from local_http import Stalling

    server = Stalling(mode)
    t0 = time.perf_counter()
    try:
        res = _audit(
            ledger_dir,
            tmp_path / "a",
            "--adjudicate",
            "--judge-model",
            str(tiny),
            "--judge-base-url",
            server.url,
            "--adjudicate-n",
            "2",
            "--timeout",
            "0.5",
            "--max-retries",
            "0",
        )
    finally:
        server.close()
    elapsed = time.perf_counter() - t0
    err = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(err) == 1, res.output
    found = re.fullmatch(
        rf"error: audit langid failed: request lid judge \d failed after 1 attempt\(s\) in ([0-9.]+) s: no answer from "
        rf"{re.escape(server.url)} within 0\.5 s",
        err[0],
    )
    assert found and 0.5 <= float(found[1]) < 3.0 and elapsed < 30, (err[0], elapsed)
    assert not (tmp_path / "a").exists() or not list((tmp_path / "a").iterdir())


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--timeout", "5"], "--timeout only apply with --adjudicate"),
        (["--max-retries", "0"], "--max-retries only apply with --adjudicate"),
        (
            ["--adjudicate", "--judge-model", "org/m", "--timeout", "5"],
            "--timeout is for the server backend; the judge runs on vllm",
        ),
        (
            ["--adjudicate", "--judge-model", "org/m", "--timeout", "-1", "--judge-base-url", "http://127.0.0.1:9/v1"],
            "--timeout: must be a number of seconds > 0, got -1.0",
        ),
    ],
)
def test_cli_bounds_need_a_judge_server(ledger_dir, tmp_path, flags, message):
    res = _audit(ledger_dir, tmp_path / "x", *flags)
    assert res.exit_code == 2 and res.stderr.strip() == f"error: {message}", res.output
    assert not (tmp_path / "x").exists()
