"""`render`: English renderings of native traces with the tiny real model (transformers), read by `audit`.

r_trace is checked against an independent count: the ledger tokenizer's tokenizer.json loaded with the HF
``tokenizers`` library directly, over the texts as the renderings file and the ledger hold them."""

from __future__ import annotations

import json
import re
import time
import unicodedata

import pytest
from click.testing import CliRunner
from tokenizers import Tokenizer

from ledger_factory import make_record
from lock_holder import lock_held
from mindcap_tok.cli.main import cli
from mindcap_tok.store.ledger import Ledger

torch = pytest.importorskip("torch", reason="the transformers backend needs the torch extra")

THAI = ["ขั้นที่ 1: คิด {i}\nดังนั้นคำตอบคือ {v}\n#### {v}\n", "โจทย์ {i}: ไข่ {v} ฟอง\n#### {v}\n"]


@pytest.fixture
def ledger(tmp_path, qwen):
    recs = []
    for item in range(3):
        for sample in range(2):
            text = THAI[sample].format(i=item, v=item + 10)
            recs.append(make_record(qwen, text, item=item, sample=sample, gold=item + 10))
            recs.append(make_record(qwen, "#### 10\n", arm="translate-act", item=item, sample=sample, gold=10))
    Ledger(tmp_path / "led").append(recs, qwen)
    return tmp_path / "led", recs


def _render(ledger, tiny, out, *extra):
    args = [
        "render",
        "--ledger",
        str(ledger),
        "--out-dir",
        str(out),
        "--model",
        str(tiny),
        "--backend",
        "transformers",
        "--max-tokens",
        "8",
        "--wave-size",
        "4",
        "--seed",
        "3",
        "--temperature",
        "1",
        *extra,
    ]
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_render_then_audit_gives_r_trace(tmp_path, tiny, ledger, qwen):
    led, recs = ledger
    out = tmp_path / "rend"
    res = _render(led, tiny, out, "--keep-capped")
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "renderings.jsonl").read_text("utf-8").splitlines()]
    # six native traces in two waves of at most four; translate-act traces are not rendered
    assert sorted((r["item"], r["sample"]) for r in rows) == [(i, s) for i in range(3) for s in range(2)]
    assert {r["lang"] for r in rows} == {"tha_Thai"} and {r["model"] for r in rows} == {"qwen3-8b"}
    assert sorted(p.name for p in (out / "waves").iterdir()) == ["wave-0001.parquet", "wave-0002.parquet"]
    kept = [r for r in rows if r["english"].strip()]

    res = CliRunner().invoke(
        cli,
        [
            "audit",
            "--ledger",
            str(led),
            "--only",
            "normalizer",
            "--renderings",
            str(out / "renderings.jsonl"),
            "--premiums",
            "th=2",
            "--budgets",
            "8,16",
            "--n-boot",
            "200",
            "--out-dir",
            str(tmp_path / "aud"),
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    audit = json.loads((tmp_path / "aud" / "audit.json").read_text("utf-8"))
    (norm,) = [a for a in audit["audits"] if a["name"] == "normalizer"]
    (trace,) = norm["tables"]["trace_premium"]
    # independent count: the tokenizer file itself, NFC, no special tokens
    tok = Tokenizer.from_file(str(qwen.source))
    native = {(r["item"], r["sample"]): r["text"] for r in recs if r["arm"] == "native"}

    def count(text: str) -> int:
        return len(tok.encode(unicodedata.normalize("NFC", text), add_special_tokens=False).ids)

    num = sum(count(native[(r["item"], r["sample"])]) for r in kept)
    den = sum(count(r["english"]) for r in kept)
    assert trace["native_tokens"] == num and trace["english_tokens"] == den and trace["traces"] == len(kept)
    assert trace["r_trace"] == pytest.approx(num / den)
    assert trace["ci_low"] <= trace["r_trace"] <= trace["ci_high"]
    delta = [d for d in norm["tables"]["delta"] if d["normalizer"] == "trace"]
    assert delta and delta[0]["premium"] == pytest.approx(num / den) and "ci_low" in delta[0]


def test_rerun_resumes_and_capped_renderings_are_left_out(tmp_path, tiny, ledger):
    led, _ = ledger
    out = tmp_path / "rend"
    assert _render(led, tiny, out, "--keep-capped").exit_code == 0
    waves = {p.name: p.read_bytes() for p in (out / "waves").iterdir()}
    kept = (out / "renderings.jsonl").read_text("utf-8")
    res = _render(led, tiny, out)  # the same run without --keep-capped: nothing decoded again
    assert res.exit_code == 0, res.output
    assert "2 waves were done" in res.output
    assert {p.name: p.read_bytes() for p in (out / "waves").iterdir()} == waves
    # random weights never stop within 8 tokens: every rendering hit the cap, so none is written by default
    assert "rendered 0 of 6" in res.output and "6 hit the cap" in res.output
    assert kept.count("\n") == 6 and (out / "renderings.jsonl").read_text("utf-8") == ""
    res = _render(led, tiny, out, "--seed", "4")
    assert res.exit_code != 0 and "another render run" in res.output


class Scripted:
    """The tiny model's backend whose replies are scripted per request (real token ids of ``reply(name)``), for
    replies random weights never give: a reasoning translator's closed and unclosed thoughts."""

    def __init__(self, inner, reply) -> None:
        self.inner, self.reply, self.tok = inner, reply, inner.tok
        self.name, self.version = inner.name, inner.version

    def generate(self, requests):
        from mindcap_tok.generation.backends import Completion

        return [[Completion(tuple(self.tok.encode(self.reply(r.name))), "stop")] for r in requests]


def test_an_unclosed_thought_is_no_rendering(tmp_path, tiny, ledger):
    from mindcap_tok.generation.backends import load_backend
    from mindcap_tok.roundtrip.render import RenderSpec, render_traces

    led, _ = ledger

    def reply(name: str) -> str:  # item 0: the thought never closes; others: closed, then the answer
        return "<think>\nStep 1: think" if "/0/" in name else "<think>\nStep 1\n</think>\n\nThe answer is 9"

    back = Scripted(load_backend("transformers", str(tiny), tokenizer_name="tiny-qwen3"), reply)
    result = render_traces(Ledger(led).read(), tmp_path / "rend", back, spec=RenderSpec("t", max_tokens=8))
    rows = [json.loads(line) for line in (tmp_path / "rend" / "renderings.jsonl").read_text("utf-8").splitlines()]
    # six native traces, two of item 0: those two give no rendering, the four others their answer channel
    assert sorted((r["item"], r["sample"]) for r in rows) == [(i, s) for i in (1, 2) for s in (0, 1)]
    assert {r["english"] for r in rows} == {"The answer is 9"}
    assert (result.kept, result.unclosed, result.empty, result.capped) == (4, 2, 0, 0)


@pytest.mark.parametrize("spec", ["{text:d}", "{text!r}", "{text:>100000}"])
def test_a_template_with_a_format_spec_is_refused_at_load(tmp_path, tiny, ledger, spec):
    led, _ = ledger
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"translate": "From {src_lang} to {tgt_lang}: " + spec}), "utf-8")
    res = _render(led, tiny, tmp_path / "rend", "--prompts", str(prompts))
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output  # before the model loads
    assert str(prompts) in res.output and spec in res.output and "Traceback" not in res.output
    assert not (tmp_path / "rend").exists()


def test_a_symlink_inside_the_render_folder_is_refused(tmp_path, tiny, ledger):
    led, _ = ledger
    out, outside = tmp_path / "rend", tmp_path / "outside"
    outside.mkdir()
    out.mkdir()
    (out / "waves").symlink_to(outside)
    res = _render(led, tiny, out)
    assert res.exit_code == 2 and "waves is a symlink" in _one_error(res)
    assert list(outside.iterdir()) == [] and sorted(p.name for p in out.iterdir()) == ["waves"]


def test_a_second_render_into_a_folder_being_written_is_refused(tmp_path, tiny, ledger):
    """Another process holds the folder's lock (a run writing it): the second run refuses at once, in one line,
    and the first's files are left as they are; once the first ends, a run goes ahead."""
    led, _ = ledger
    out = tmp_path / "rend"
    assert _render(led, tiny, out, "--keep-capped").exit_code == 0
    before = _files(out)
    with lock_held(out) as pid:
        res = _render(led, tiny, out, "--keep-capped")
        assert res.exit_code == 2 and f"being written by another run (process {pid} on" in _one_error(res)
        assert _files(out) == before
    assert _render(led, tiny, out, "--keep-capped").exit_code == 0  # the lock went with its process


def _files(folder):
    """Every file below ``folder`` and its bytes, but the lock file (a holder writes its name in it)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and p.name != ".mindcap-tok-lock"
    }


def _one_error(res) -> str:
    """The one error line of a refused run (the transformers backend's weight-loading progress may precede it)."""
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in res.output, res.output
    return errors[0]


@pytest.mark.parametrize("mode", ["silent", "trickle"])
def test_a_stalling_translator_server_ends_render_after_the_timeout(tmp_path, tiny, ledger, mode):
    """A server that accepts the connection and never answers (or trickles a byte every 0.1 s): --timeout 0.5 and
    --max-retries 1 end `render` after two attempts of about 0.5 s each (and at most 0.5 s of backoff), in one line
    naming the URL and the attempts; no wave and no renderings file are written."""
    pytest.importorskip("httpx", reason="the server backend needs the server extra (httpx)")
    from local_http import Stalling

    led, _ = ledger
    out = tmp_path / "rend"
    server = Stalling(mode)
    args = [
        "render",
        "--ledger",
        str(led),
        "--out-dir",
        str(out),
        "--model",
        str(tiny),
        "--base-url",
        server.url,
        "--timeout",
        "0.5",
        "--max-retries",
        "1",
        "--max-tokens",
        "8",
        "--wave-size",
        "4",
    ]
    t0 = time.perf_counter()
    try:
        res = CliRunner().invoke(cli, args, catch_exceptions=False)
    finally:
        server.close()
    elapsed = time.perf_counter() - t0
    err = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and res.stdout == "" and len(err) == 1, res.output
    found = re.fullmatch(
        rf"error: request render \S+ failed after 2 attempt\(s\) in ([0-9.]+) s: no answer from "
        rf"{re.escape(server.url)} within 0\.5 s",
        err[0],
    )
    assert found, err[0]
    assert 1.0 <= float(found[1]) < 4.0 and elapsed < 20, (found[1], elapsed)
    assert not (out / "waves").exists() or not list((out / "waves").iterdir())
    assert not (out / "renderings.jsonl").exists()


def test_timeout_needs_a_translator_server(tmp_path, tiny, ledger):
    led, _ = ledger
    res = _render(led, tiny, tmp_path / "rend", "--timeout", "5")
    assert res.exit_code == 2 and not (tmp_path / "rend").exists()
    assert res.stderr.strip() == ("error: --timeout is for the server backend; the translator runs on transformers")
