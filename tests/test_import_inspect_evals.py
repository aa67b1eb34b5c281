"""`ledger import --from inspect` on logs inspect_ai itself writes: a tiny model run by inspect's `hf/` provider
(a `.eval` log) and by its `openai-api/` provider against a local OpenAI-compatible server serving the same model
(a `.json` log, real stop reasons). Counts, caps, stop reasons and token counts are checked against what
inspect's own reader returns, and strict scoring at the cap against inspect's own `pattern` scorer."""

from __future__ import annotations

import json
import threading
import time
import zipfile

import pytest
from click.testing import CliRunner

pytestmark = [pytest.mark.evals, pytest.mark.slow]
pytest.importorskip("inspect_ai", reason="needs the inspect extra (its own environment, .venv-evals)")
torch = pytest.importorskip("torch")

from inspect_ai import Task, eval  # noqa: E402
from inspect_ai.dataset import MemoryDataset, Sample  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.scorer import pattern  # noqa: E402
from inspect_ai.solver import generate  # noqa: E402
from transformers import AutoModelForCausalLM, GenerationConfig, PreTrainedTokenizerFast  # noqa: E402

from local_http import LocalHTTP  # noqa: E402
from mindcap_tok.cli.main import cli  # noqa: E402
from mindcap_tok.scoring.score import score_ledger  # noqa: E402
from mindcap_tok.store.ledger import Ledger  # noqa: E402
from mindcap_tok.tokenization.load import load_tokenizer  # noqa: E402
from tiny_model import build_tiny_model  # noqa: E402

CAP = 12
N = 24
LANGS = ("eng_Latn", "tha_Thai")
#: the strict parser's answer line (integer.py): the first line that is only ``#### <integer>``
STRICT_LINE = r"(?m)^[ \t]*####[ \t]*(-?[0-9]+)[ \t\r]*$"


def _bias_toward_answers(folder) -> None:
    """A purely random model writes no answers and never stops: bias its logits (``sequence_bias``, saved in
    the generation config every ``generate`` call reads) toward a blank line (not the prompt's closing new
    line), then ``####``, `` ``, a digit (mostly 7) and the end token."""
    tok = PreTrainedTokenizerFast.from_pretrained(folder)
    vocab = tok.get_vocab()
    digits = [vocab[str(d)] for d in range(1, 10)]
    newline, hashes, space, eos = vocab["ĊĊ"], vocab["####"], vocab["Ġ"], tok.eos_token_id
    bias = [[[newline], 2.6], [[newline, hashes], 14.0], [[hashes, space], 14.0]]
    bias += [[[hashes, space, d], 13.0 + 2.0 * (d == vocab["7"])] for d in digits]
    bias += [[[space, d, eos], 12.0] for d in digits]
    config = GenerationConfig.from_pretrained(folder)
    config.sequence_bias = bias
    config.save_pretrained(folder)


def _dataset() -> MemoryDataset:
    samples = [
        Sample(
            id=i + 1,
            input=f"Question {i}: Janet has {i + 3} eggs and eats {i % 4}. End with a line #### <integer>.",
            target=str(7 if i % 3 else 1 + i % 9),
            metadata={"task": "mgsm", "lang": LANGS[i % 2], "arm": "native"},
        )
        for i in range(N)
    ]
    return MemoryDataset(samples, name="tiny-mgsm")


class TinyServer:
    """An OpenAI-compatible `/v1/chat/completions` serving the tiny model with transformers' own `generate`:
    `finish_reason` is `length` when the decode reached `max_tokens` without the end token, else `stop`.

    ``reasoning``: it serves the model as vLLM serves a reasoning model: what precedes the first `####` is the
    reasoning (`reasoning_content`, counted in `usage.completion_tokens_details.reasoning_tokens`), the rest the
    content. Asked for `return_token_ids` (vLLM's extension), it returns the sampled ids (`token_ids` in the
    choice, the end token included as vLLM does) and `prompt_token_ids`."""

    def __init__(self, folder, *, reasoning: bool = False) -> None:
        self.reasoning = reasoning
        self.tok = PreTrainedTokenizerFast.from_pretrained(folder)
        self.model = AutoModelForCausalLM.from_pretrained(folder)
        self.lock = threading.Lock()
        self.http = LocalHTTP(lambda h: h.reply(404, {"error": {"message": "Not Found"}}), self.post)

    def post(self, handler, body: bytes) -> None:
        req = json.loads(body)
        ids = self.tok.apply_chat_template(req["messages"], add_generation_prompt=True, return_tensors="pt")
        ids = ids["input_ids"] if not torch.is_tensor(ids) else ids
        with self.lock:
            torch.manual_seed((req.get("seed") or 0) + int(ids.sum()))  # each prompt its own seeded draw
            out = self.model.generate(ids, max_new_tokens=req["max_tokens"], do_sample=True)
        sampled = out[0, ids.shape[1] :].tolist()
        stopped = self.tok.eos_token_id in sampled
        sampled = sampled[: sampled.index(self.tok.eos_token_id) + 1] if stopped else sampled
        new = sampled[:-1] if stopped else sampled
        hashes = self.tok.convert_tokens_to_ids("####")
        split = (new.index(hashes) if hashes in new else len(new)) if self.reasoning else 0
        message = {"role": "assistant", "content": self.tok.decode(new[split:], skip_special_tokens=True)}
        usage = {"prompt_tokens": ids.shape[1], "completion_tokens": len(sampled)}
        if self.reasoning:
            message["reasoning_content"] = self.tok.decode(new[:split], skip_special_tokens=True)
            usage["completion_tokens_details"] = {"reasoning_tokens": split}
        choice = {"index": 0, "message": message, "finish_reason": "stop" if stopped else "length"}
        body = {"id": "cmpl-tiny", "object": "chat.completion", "created": int(time.time()), "model": req["model"]}
        if req.get("return_token_ids"):
            choice["token_ids"] = sampled
            body["prompt_token_ids"] = ids[0].tolist()
        usage["total_tokens"] = ids.shape[1] + len(sampled)
        handler.reply(200, {**body, "choices": [choice], "usage": usage})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The tiny model's folder and the log folders of its two inspect runs (hf: .eval, openai-api: .json)."""
    root = tmp_path_factory.mktemp("inspect")
    model = build_tiny_model(root / "tiny")
    _bias_toward_answers(model)
    task = Task(dataset=_dataset(), solver=generate(), scorer=pattern(STRICT_LINE), name="tiny_mgsm")
    common = {"max_tokens": CAP, "seed": 11, "display": "none", "max_connections": 4}
    (hf,) = eval(task, model=f"hf/{model}", log_dir=str(root / "hf"), log_format="eval", **common)
    server = TinyServer(model)
    mp = pytest.MonkeyPatch()
    mp.setenv("LOCAL_BASE_URL", server.http.url)
    mp.setenv("LOCAL_API_KEY", "none")
    try:
        (api,) = eval(task, model="openai-api/local/tiny", log_dir=str(root / "api"), log_format="json", **common)
    finally:
        mp.undo()
        server.http.close()
    assert hf.status == api.status == "success"
    return model, root


def _import(tmp_path, model, logs, *extra):
    out = tmp_path / "L"
    result = CliRunner().invoke(
        cli,
        ["ledger", "import", *map(str, logs), "--from", "inspect", "--tokenizer", str(model), "--out-dir", str(out)],
    )
    assert result.exit_code == 0, result.output
    return Ledger(out), result.output


def _by_item(log):
    return {s.id: s for s in read_eval_log(log).samples}


@pytest.mark.parametrize(("run", "suffix"), [("hf", ".eval"), ("api", ".json")])
def test_import_holds_what_the_log_holds(tmp_path, runs, run, suffix):
    model, root = runs
    (log,) = (root / run).glob(f"*{suffix}")
    led, output = _import(tmp_path, model, [root / run])
    frame = led.to_pandas().sort_values("item")
    samples = _by_item(log)
    assert len(frame) == len(samples) == N
    assert f"imported {N} of {N} samples from 1 inspect log(s)" in output
    assert set(frame["cap"]) == {CAP} and not frame["cap_inferred"].any()
    assert set(frame["task"]) == {"mgsm"} and set(frame["lang"]) == set(LANGS)
    assert frame["retokenized"].all()
    tok = load_tokenizer(str(model))
    for rec in frame.itertuples():
        sample = samples[rec.item]
        assert rec.text == sample.output.completion
        assert list(rec.output_ids) == tok.encode(sample.output.completion)
        assert rec.gold == int(sample.target)
        assert rec.log_output_tokens == sample.output.usage.output_tokens
        logged = sample.output.stop_reason
        if run == "hf":  # the hf provider logs no stop reason: inferred from the encoded length
            assert logged == "unknown" and rec.finish_inferred
            assert rec.finish_reason == ("length" if rec.n_tokens >= CAP else "stop")
        else:
            assert not rec.finish_inferred
            assert rec.finish_reason == {"max_tokens": "length", "stop": "stop"}[logged]
    if run == "api":  # the server's real stop reasons: some decodes hit the cap, some stop
        assert set(frame["finish_reason"]) == {"stop", "length"}
    over = int((frame["n_tokens"] > CAP).sum())
    assert f"{over} of them longer than their cap" in output
    # rerunning the import adds nothing
    again = CliRunner().invoke(
        cli, ["ledger", "import", str(log), "--from", "inspect", "--tokenizer", str(model), "--out-dir", str(led.root)]
    )
    assert again.exit_code == 0 and f"imported 0 of {N} samples" in again.output, again.output


def test_strict_score_at_the_cap_equals_inspects_scorer(tmp_path, runs):
    model, root = runs
    led, _ = _import(tmp_path, model, [root / "hf", root / "api"])
    frame = led.to_pandas()
    scores = score_ledger(frame, load_tokenizer(str(model)), budgets=[CAP]).by_budget
    logs = {
        f"inspect:{run}": _by_item(next((root / r).glob("*.*"))) for run, r in (("hf", "hf"), ("openai-api", "api"))
    }
    compared = correct = 0
    for rec, score in zip(frame.itertuples(), scores["score"].to_numpy(), strict=True):
        if rec.n_tokens > CAP:  # a re-encoding longer than the cap is cut at the cap: not comparable
            continue
        sample = logs[rec.generator][rec.item]
        assert score == (sample.scores["pattern"].value == "C"), rec.text
        compared += 1
        correct += score
    assert compared >= N and correct > 0


def test_a_malformed_log_is_one_line_and_imports_nothing(tmp_path, runs):
    model, root = runs
    (good,) = (root / "hf").glob("*.eval")
    bad = tmp_path / "logs" / "broken.eval"
    bad.parent.mkdir()
    bad.write_bytes(good.read_bytes()[:200])  # a log cut short (a copy interrupted)
    result = CliRunner().invoke(
        cli,
        [
            "ledger",
            "import",
            str(good),
            str(bad),
            "--from",
            "inspect",
            "--tokenizer",
            str(model),
            "--out-dir",
            str(tmp_path / "L"),
        ],
    )
    assert result.exit_code != 0
    assert len(result.output.strip().splitlines()) == 1 and "broken.eval: not a readable inspect log" in result.output
    assert not Ledger(tmp_path / "L").exists()


#: an eval named as lm-eval names the task: task, language and arm come from the name (no metadata)
LM_EVAL_NAME = "mgsm_native_cot_th"
#: the zip compression method number of Zstandard
ZSTANDARD = 93
TOKEN_LIMIT = 5000


@pytest.fixture(scope="module")
def ids_run(tmp_path_factory):
    """The tiny model's folder and the log of an inspect run against the reasoning server, asked for the sampled
    ids (``extra_body``) and logging every model call's raw response (``log_model_api``)."""
    root = tmp_path_factory.mktemp("inspect-ids")
    model = build_tiny_model(root / "tiny")
    _bias_toward_answers(model)
    samples = [Sample(id=s.id, input=s.input, target=s.target) for s in _dataset()]
    task = Task(dataset=MemoryDataset(samples), solver=generate(), scorer=pattern(STRICT_LINE), name=LM_EVAL_NAME)
    server = TinyServer(model, reasoning=True)
    mp = pytest.MonkeyPatch()
    mp.setenv("LOCAL_BASE_URL", server.http.url)
    mp.setenv("LOCAL_API_KEY", "none")
    try:
        (log,) = eval(
            task,
            model="openai-api/local/tiny",
            log_dir=str(root / "logs"),
            log_format="eval",
            max_tokens=CAP,
            seed=11,
            display="none",
            max_connections=4,
            extra_body={"return_token_ids": True},
            log_model_api=True,
            token_limit=TOKEN_LIMIT,
        )
    finally:
        mp.undo()
        server.http.close()
    assert log.status == "success"
    return model, root / "logs"


def test_sampled_ids_reasoning_and_token_limit_come_from_the_log(tmp_path, ids_run):
    model, logs = ids_run
    (log,) = logs.glob("*.eval")
    with zipfile.ZipFile(log) as archive:  # inspect writes its members in Zstandard: read by its own reader
        assert ZSTANDARD in {info.compress_type for info in archive.infolist()}
    led, output = _import(tmp_path, model, [logs])
    frame = led.to_pandas()
    samples = _by_item(log)
    assert len(frame) == N and not frame["retokenized"].any() and "0 retokenized from text" in output
    assert set(frame["task"]) == {"mgsm"} and set(frame["lang"]) == {"tha_Thai"} and set(frame["arm"]) == {"native"}
    exhausted = 0
    for rec in frame.itertuples():
        sample = samples[rec.item]
        (event,) = [e for e in sample.events if e.event == "model"]
        response = event.call.response
        assert list(rec.output_ids) == response["choices"][0]["token_ids"]
        assert list(rec.prompt_ids) == response["prompt_token_ids"]
        assert rec.text == sample.output.completion and rec.token_limit == sample.token_limit == TOKEN_LIMIT
        usage = sample.output.usage
        assert rec.reasoning_tokens == usage.reasoning_tokens and rec.log_output_tokens == usage.output_tokens
        cut = sample.output.stop_reason == "max_tokens"
        assert rec.finish_reason == ("length" if cut else "stop") and (rec.n_tokens == CAP) == cut
        reasoned = usage.reasoning_tokens > 0
        want = (
            cut and reasoned and (not sample.output.completion.strip() or usage.reasoning_tokens >= usage.output_tokens)
        )
        assert rec.reasoning_exhausted == want
        exhausted += want
    assert 0 < exhausted < N, "some decodes cut inside their reasoning, some not"
    assert f"the reasoning exhausted the cap in {exhausted}" in output
