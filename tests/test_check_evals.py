"""`mindcap-tok check` on logs lm-evaluation-harness wrote for real (``-m evals``, the .venv-evals environment).

The tiny biased model (tests/lmeval_run.py) answers 8 items in Thai and German through a local copy of lm-eval's
``mgsm_native_cot_th``/``_de`` tasks at cap 24, so that some generations hit the cap and some stop. The cut shares
are checked against the model's own transformers tokenizer (a text re-encoding to the cap or more was cut), their
intervals against statsmodels' Wilson interval, the rerun caps against floor(r·24) by hand, and the exit statuses
of ``--fail-on-binding`` on either side of the largest cut share.
"""

from __future__ import annotations

import json
from fractions import Fraction
from math import floor

import pytest
from click.testing import CliRunner
from statsmodels.stats.proportion import proportion_confint

from lmeval_run import ITEMS, biased_tiny_model, local_mgsm_tasks, run_lm_eval
from mindcap_tok.cli.main import cli

pytestmark = pytest.mark.evals

CAP = 24
LANGS = {"th": "tha_Thai", "de": "deu_Latn"}
PREMIUMS = {"th": Fraction(255, 100), "de": Fraction(156, 100)}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("lmeval-check")
    model = biased_tiny_model(root / "model")
    tasks = local_mgsm_tasks(root / "tasks", list(LANGS), CAP)
    names = [f"mgsm_native_cot_{lang}" for lang in LANGS]
    done = run_lm_eval(model, tasks, names, root / "out", limit=len(ITEMS))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = {n: [json.loads(x) for x in next((root / "out").rglob(f"samples_{n}_*.jsonl")).open()] for n in names}
    return {"root": root, "model": model, "lines": lines}


def _check(run, *extra):
    premiums = [f"{lang}={float(r)}" for lang, r in PREMIUMS.items()]
    args = ["check", str(run["root"] / "out"), "--tokenizer", str(run["model"]), "--premiums", *premiums]
    return CliRunner().invoke(cli, [*args, *extra])


def test_cut_shares_and_rerun_caps_of_a_real_lm_eval_run(run):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(run["model"])
    res = _check(run, "--format", "json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["source"] == "lm-eval" and got["ledger"] is None
    cells = {c["lang"]: c for c in got["cells"]}
    assert sorted(cells) == sorted(LANGS.values())
    for lang, code in LANGS.items():
        docs = {d["doc_id"]: d["resps"][0][0] for d in run["lines"][f"mgsm_native_cot_{lang}"]}
        cut = sum(len(hf(t, add_special_tokens=False)["input_ids"]) >= CAP for t in docs.values())
        cell = cells[code]
        assert (cell["records"], cell["cap"], cell["cut"], cell["unknown"]) == (len(ITEMS), CAP, cut, 0)
        cut_wrong = cut - round((cell["acc_cut"] or 0) * cut)  # a higher cap could turn only these right
        assert cell["cut_share"] == cut / len(ITEMS) and cell["max_gain"] == pytest.approx(cut_wrong / len(ITEMS))
        low, high = proportion_confint(cut, len(ITEMS), alpha=0.05, method="wilson")
        assert (cell["ci_low"], cell["ci_high"]) == pytest.approx((low, high), abs=1e-12)
        assert cell["rerun_cap"] == floor(PREMIUMS[lang] * CAP)
        assert cell["harness_task"] == f"mgsm_native_cot_{lang}"
        assert f"--tasks mgsm_native_cot_{lang} --gen_kwargs max_gen_toks={cell['rerun_cap']}" in got["snippet"]
    shares = [c["cut_share"] for c in cells.values()]
    assert 0 < max(shares) < 1, "the run should hold both capped and stopped generations"


def test_fail_on_binding_exits_3_above_the_largest_cut_share_only(run):
    got = json.loads(_check(run, "--format", "json").stdout)
    top = max(c["cut_share"] for c in got["cells"])
    below, at = _check(run, "--fail-on-binding", str(top - 1e-9)), _check(run, "--fail-on-binding", str(top))
    assert (below.exit_code, at.exit_code) == (3, 0), (below.output, at.output)
    assert "binding: " in below.stderr and "binding: " not in at.stderr
