"""lm-evaluation-harness run for real (``-m evals``, the .venv-evals environment): import its logs and check
them against lm-eval's own output.

The tiny biased model (tests/lmeval_run.py) answers 8 items in Thai and German through a local copy of lm-eval's
``mgsm_native_cot_th``/``_de`` tasks at cap 24, so that some generations hit the cap and some stop; the import is
checked for its counts, caps and inferred stop reasons, and ``score --parser lm-eval-flexible`` / ``lm-eval-strict``
at the cap must give the ``exact_match`` lm-eval reported, per task and per sample.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from lmeval_run import ITEMS, biased_tiny_model, local_mgsm_tasks, run_lm_eval
from mindcap_tok.cli.main import cli
from mindcap_tok.store.ledger import Ledger

pytestmark = pytest.mark.evals

CAP = 24
LANGS = {"th": "tha_Thai", "de": "deu_Latn"}
FILTERS = {"lm-eval-strict": "strict-match", "lm-eval-flexible": "flexible-extract"}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("lmeval")
    model = biased_tiny_model(root / "model")
    tasks = local_mgsm_tasks(root / "tasks", list(LANGS), CAP)
    names = [f"mgsm_native_cot_{lang}" for lang in LANGS]
    done = run_lm_eval(model, tasks, names, root / "out", limit=len(ITEMS))
    assert done.returncode == 0, done.stderr[-3000:]
    (results,) = (root / "out").rglob("results_*.json")
    files = {name: next((root / "out").rglob(f"samples_{name}_*.jsonl")) for name in names}
    lines = {name: [json.loads(x) for x in path.open(encoding="utf-8")] for name, path in files.items()}
    ledger = root / "L"
    args = ["ledger", "import", str(root / "out"), "--from", "lm-eval", "--tokenizer", str(model)]
    res = CliRunner().invoke(cli, [*args, "--out-dir", str(ledger)])
    assert res.exit_code == 0, res.output
    return {
        "root": root,
        "model": model,
        "results": json.loads(results.read_text()),
        "lines": lines,
        "ledger": ledger,
        "summary": res.output,
    }


def test_default_cap_is_lm_evals():
    from lm_eval.models.huggingface import HFLM

    from mindcap_tok.ingest.lmeval import LMEVAL_DEFAULT_CAP

    assert HFLM.max_gen_toks.fget(None) == LMEVAL_DEFAULT_CAP


def test_records_one_per_sample_with_the_runs_cap(run):
    for lines in run["lines"].values():
        assert len(lines) == 2 * len(ITEMS)  # one line per filter
    assert run["summary"].startswith(f"imported {2 * len(ITEMS)} of {2 * len(ITEMS)} records")
    table = Ledger(run["ledger"]).read().to_pandas()
    assert len(table) == 2 * len(ITEMS)
    assert sorted(table["lang"].unique()) == sorted(LANGS.values())
    assert set(table["arm"]) == {"native"} and set(table["task"]) == {"mgsm"}
    assert (table["cap"] == CAP).all() and not table["cap_inferred"].any()
    assert run["results"]["configs"]["mgsm_native_cot_th"]["generation_kwargs"]["max_gen_toks"] == CAP
    for lang, code in LANGS.items():
        texts = {d["doc_id"]: d["resps"][0][0] for d in run["lines"][f"mgsm_native_cot_{lang}"]}
        golds = {d["doc_id"]: int(d["target"]) for d in run["lines"][f"mgsm_native_cot_{lang}"]}
        mine = table[table["lang"] == code].set_index("item")
        assert mine["text"].to_dict() == texts and mine["gold"].astype(int).to_dict() == golds


def test_stop_reasons_inferred_against_the_cap(run):
    """``length`` exactly where transformers' own tokenizer of the model encodes the text to the cap or more."""
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(run["model"])
    table = Ledger(run["ledger"]).read().to_pandas()
    want = [len(hf(t, add_special_tokens=False)["input_ids"]) >= CAP for t in table["text"]]
    assert (table["finish_reason"] == "length").tolist() == want
    assert any(want) and not all(want), "the run should hold both capped and stopped generations"
    assert table["finish_inferred"].all() and table["retokenized"].all()


@pytest.mark.parametrize("parser", list(FILTERS))
def test_score_at_the_cap_equals_lm_evals_exact_match(run, parser, tmp_path):
    out, save = tmp_path / "curves.json", tmp_path / "scores"
    args = ["score", "--ledger", str(run["ledger"]), "--parser", parser, "--budgets", str(CAP)]
    res = CliRunner().invoke(cli, [*args, "--format", "json", "--out", str(out), "--save", str(save)])
    assert res.exit_code == 0, res.output
    curves = {row["lang"]: row["accuracy"] for row in json.loads(out.read_text())}
    by_record = pd.read_parquet(save / "by_budget.parquet")
    for lang, code in LANGS.items():
        name = f"mgsm_native_cot_{lang}"
        assert curves[code] == pytest.approx(run["results"]["results"][name][f"exact_match,{FILTERS[parser]}"])
        theirs = {d["doc_id"]: d["exact_match"] for d in run["lines"][name] if d["filter"] == FILTERS[parser]}
        mine = by_record[by_record["lang"] == code].set_index("item")["score"].to_dict()
        assert mine == {k: int(v) for k, v in theirs.items()}
    if parser == "lm-eval-flexible":
        assert 0 < sum(curves.values()) < len(curves), "some answers right, some wrong"
