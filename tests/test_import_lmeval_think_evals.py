"""lm-evaluation-harness run for real with ``think_end_token`` (``-m evals``, the .venv-evals environment).

The tiny biased model (tests/lmeval_run.py), its tokenizer holding Qwen3's think tags and the model favouring
``</think>``, answers 8 German items through a local copy of lm-eval's ``mgsm_native_cot_de`` at cap 23, twice,
greedily: once as a plain model (lm-eval logs the whole decode, cut at the task's stop strings) and once with
``think_end_token=</think>`` (lm-eval logs only the text after the last close). The same decodes: the second
run's texts are the first's after their last close, which is what the import must not read as whole outputs.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from lmeval_run import ITEMS, biased_tiny_model, local_mgsm_tasks, run_lm_eval
from mindcap_tok.cli.main import cli
from mindcap_tok.store.ledger import Ledger

pytestmark = pytest.mark.evals

CAP = 23
TASK = "mgsm_native_cot_de"
CLOSE = "</think>"


def _run(root, model, tasks, name: str, model_args: str = "") -> dict:
    out = root / name
    done = run_lm_eval(model, tasks, [TASK], out, limit=len(ITEMS), model_args=model_args)
    assert done.returncode == 0, done.stderr[-3000:]
    (samples,) = out.rglob(f"samples_{TASK}_*.jsonl")
    (results,) = out.rglob("results_*.json")
    texts = {}
    for line in samples.open(encoding="utf-8"):
        doc = json.loads(line)
        texts[doc["doc_id"]] = doc["resps"][0][0]
    ledger = root / f"L-{name}"
    args = ["ledger", "import", str(out), "--from", "lm-eval", "--tokenizer", str(model), "--out-dir", str(ledger)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    return {"texts": texts, "results": json.loads(results.read_text()), "ledger": ledger, "summary": res.output}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[dict, dict]:
    root = tmp_path_factory.mktemp("lmeval-think")
    model = biased_tiny_model(root / "model", think_close=True)
    tasks = local_mgsm_tasks(root / "tasks", ["de"], CAP)
    plain = _run(root, model, tasks, "plain")
    think = _run(root, model, tasks, "think", f"think_end_token={CLOSE}")
    return plain, think


def test_lm_eval_logs_only_the_text_after_the_last_close(runs):
    """What the import's marking rests on, seen in lm-eval's own logs: the thinking run's response is the plain
    run's after its last close, and some decodes closed a thought (so their logged text is shorter)."""
    plain, think = runs
    assert think["results"]["config"]["model_args"]["think_end_token"] == CLOSE
    assert plain["texts"].keys() == think["texts"].keys()
    for doc, text in plain["texts"].items():
        assert think["texts"][doc] == text.split(CLOSE)[-1].lstrip(), doc
    assert any(CLOSE in text for text in plain["texts"].values()), "some decodes should close a thought"


def test_records_of_a_thinking_run_are_partial_with_unknown_cut(runs):
    plain, think = runs
    assert f"{len(ITEMS)} hold only the text after the thought" in think["summary"]
    mine = Ledger(think["ledger"]).read().to_pandas().set_index("item")
    assert mine["output_partial"].all() and set(mine["finish_reason"]) == {"unknown"}
    assert not mine["finish_inferred"].any() and (mine["cap"] == CAP).all()
    assert mine["text"].to_dict() == think["texts"]
    whole = Ledger(plain["ledger"]).read().to_pandas().set_index("item")
    assert not whole["output_partial"].any() and set(whole["finish_reason"]) <= {"stop", "length"}
    closed = [doc for doc, text in plain["texts"].items() if CLOSE in text]
    # where a thought closed, the logged text holds fewer ids than the decode: a lower bound of its length
    assert all(mine.loc[doc, "n_tokens"] < whole.loc[doc, "n_tokens"] for doc in closed)


def test_ledger_info_counts_their_cut_as_unknown(runs, tmp_path):
    _, think = runs
    out = tmp_path / "info.json"
    res = CliRunner().invoke(cli, ["ledger", "info", str(think["ledger"]), "--format", "json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(out.read_text())
    assert row["cap_hit"] == 0 and row["cut_unknown"] == 1
