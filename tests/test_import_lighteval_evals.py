"""lighteval details written by lighteval's own code (``-m evals``, the .venv-evals environment), imported.

The run is lighteval's writer on responses of known output ids: its ``Doc``, ``ModelResponse`` and
``DetailsLogger.Detail`` dataclasses, saved by its ``EvaluationTracker`` (details Parquet and results JSON in its
own layout), for the tiny Qwen3 with think tokens. lighteval's MGSM tasks ``mgsm:de`` (thinking responses,
its reasoning-tag removal applied as its pipeline does, ids as vLLM logs them: lists) and ``mgsm:th`` (ids as its
transformers backend logs them: tensors), 3 docs of 2 samples each, some cut by the cap. The cap comes from the
run's ``max_new_tokens``, which lighteval lets override the docs' ``generation_size``. ``score`` at the cap must
give the accuracies worked out below from the texts.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from mindcap_tok.cli.main import cli
from mindcap_tok.store import Ledger

pytestmark = pytest.mark.evals

CAP = 64
SEED = 7
TAGS = [("<think>", "</think>")]
FILLER = " und dann rechnen wir weiter" * 40
#: per task: (gold choice, [(response text, whether the cap cuts it, whether it is right at the cap)] per sample)
DOCS = {
    "mgsm:de|0": [
        (
            " 18",
            [
                ("<think>9+9</think>Die Antwort lautet 18", False, True),
                ("<think>9+8</think>Die Antwort lautet 17", False, False),
            ],
        ),
        (" 7", [("<think>3 plus 4" + FILLER, True, False), ("<think>3+4</think>Die Antwort lautet 7", False, True)]),
        (
            " 42",
            [
                ("<think>6*7</think>Die Antwort lautet 42", False, True),
                ("<think>kurz</think>Erst" + FILLER, True, False),
            ],
        ),
    ],
    "mgsm:th|0": [
        (" 5", [("คำตอบคือ 5", False, True), ("คำตอบคือ 5", False, True)]),
        (" 12", [("เริ่ม" + FILLER, True, False), ("คำตอบคือ 13", False, False)]),
        (" 30", [("คำตอบคือ 30", False, True), ("คำตอบคือ 30", False, True)]),
    ],
}
LANGS = {"mgsm:de|0": "deu_Latn", "mgsm:th|0": "tha_Thai"}


@pytest.fixture(scope="module")
def run(tiny_think, tmp_path_factory) -> dict:
    """lighteval's tracker saves the run; the ids given for each response, and the import's summary line."""
    import torch
    from lighteval.logging.evaluation_tracker import EvaluationTracker
    from lighteval.logging.info_loggers import DetailsLogger
    from lighteval.models.model_input import GenerationParameters
    from lighteval.models.model_output import ModelResponse
    from lighteval.models.transformers.transformers_model import TransformersModelConfig
    from lighteval.tasks.requests import Doc
    from lighteval.utils.utils import remove_reasoning_tags
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(tiny_think)
    root = tmp_path_factory.mktemp("lighteval")
    tracker = EvaluationTracker(output_dir=str(root / "out"), save_details=True)
    params = GenerationParameters(max_new_tokens=CAP, seed=SEED, temperature=0.7)
    tracker.general_config_logger.log_model_info(
        TransformersModelConfig(model_name=str(tiny_think), generation_parameters=params)
    )
    given: dict[tuple[str, int, int], list[int]] = {}
    prompts: dict[tuple[str, int], list[int]] = {}
    for task, docs in DOCS.items():
        for item, (gold, responses) in enumerate(docs):
            prompt = f"Frage {item}: wie viel?\nSchritt-für-Schritt-Antwort:"
            outputs = []
            for sample, (text, cut, _) in enumerate(responses):
                ids = hf(text, add_special_tokens=False)["input_ids"]
                assert (len(ids) > CAP) if cut else (len(ids) < CAP), (text, len(ids))
                outputs.append(ids[:CAP])
                given[task, item, sample] = ids[:CAP]
            texts = hf.batch_decode(outputs, skip_special_tokens=True)
            prompts[task, item] = hf(prompt, add_special_tokens=False)["input_ids"]
            thai = task.startswith("mgsm:th")
            doc = Doc(
                query=prompt,
                choices=[gold],
                gold_index=0,
                id=str(item),
                task_name=task,
                num_samples=2,
                generation_size=None if thai else 2048,
            )
            response = ModelResponse(
                input=prompt,
                input_tokens=prompts[task, item],
                text=texts,
                output_tokens=[torch.tensor(ids) for ids in outputs] if thai else outputs,
                text_post_processed=[remove_reasoning_tags(t, tag_pairs=TAGS) for t in texts],
            )
            # what DetailsLogger.log stores (its hashing of the doc, which the Parquet does not hold, fails under
            # the xxhash 4 of this environment: it hashes str)
            tracker.details_logger.details[task].append(DetailsLogger.Detail(doc, response, {"extractive_match": 0.0}))
    tracker.save()
    ledger = root / "L"
    args = ["ledger", "import", str(root / "out"), "--from", "lighteval", "--tokenizer", str(tiny_think)]
    res = CliRunner().invoke(cli, [*args, "--out-dir", str(ledger)])
    assert res.exit_code == 0, res.output
    return {
        "root": root,
        "model": str(tiny_think),
        "ledger": ledger,
        "given": given,
        "prompts": prompts,
        "hf": hf,
        "summary": res.output,
    }


def test_details_in_lightevals_layout(run):
    (details_dir,) = {p.parent for p in (run["root"] / "out" / "details").rglob("details_*.parquet")}
    names = sorted(p.name.rsplit("_", 1)[0] for p in details_dir.glob("*.parquet"))
    assert names == ["details_mgsm:de|0", "details_mgsm:th|0"]
    (results,) = (run["root"] / "out" / "results").rglob("results_*.json")
    assert json.loads(results.read_text())["config_general"]["model_config"]["generation_parameters"]["seed"] == SEED


def test_ids_are_the_sampled_ones_not_reencoded(run):
    table = Ledger(run["ledger"]).read().to_pandas()
    assert len(table) == len(run["given"]) == 12
    assert run["summary"].startswith("imported 12 of 12 records") and "0 retokenized" in run["summary"]
    assert not table["retokenized"].any() and table["finish_inferred"].all()
    by_task = {code: task for task, code in LANGS.items()}
    for row in table.itertuples():
        key = (by_task[row.lang], row.item, row.sample)
        assert list(row.output_ids) == run["given"][key]
        assert list(row.prompt_ids) == run["prompts"][key[:2]]


def test_cap_gold_task_language_and_samples(run):
    table = Ledger(run["ledger"]).read().to_pandas()
    assert (table["cap"] == CAP).all() and not table["cap_inferred"].any() and (table["seed"] == SEED).all()
    assert set(table["task"]) == {"mgsm"} and set(table["arm"]) == {"native"}
    assert set(table["model"]) == {run["model"]}  # not a registry model: stored as the run names it
    for task, code in LANGS.items():
        mine = table[table["lang"] == code]
        assert sorted(zip(mine["item"], mine["sample"], strict=True)) == [(i, s) for i in range(3) for s in range(2)]
        golds = {i: int(gold) for i, (gold, _) in enumerate(DOCS[task])}
        assert mine.set_index("item")["gold"].astype(int).to_dict() == golds
        assert set(mine["template_id"]) == {f"lighteval:{task}"}
        cut = {(i, s): c for i, (_, rs) in enumerate(DOCS[task]) for s, (_, c, _) in enumerate(rs)}
        for row in mine.itertuples():
            assert row.finish_reason == ("length" if cut[row.item, row.sample] else "stop")
            assert (len(row.output_ids) == CAP) == cut[row.item, row.sample]


def test_reasoning_split_where_lighteval_logged_one(run):
    table = Ledger(run["ledger"]).read().to_pandas()
    close = run["hf"].convert_tokens_to_ids("</think>")
    german, thai = table[table["lang"] == "deu_Latn"], table[table["lang"] == "tha_Thai"]
    assert german["thinking"].all() and not thai["thinking"].any()
    for row in german.itertuples():
        ids = list(row.output_ids)
        want = ids.index(close) if close in ids else None
        assert (None if pd.isna(row.think_end) else int(row.think_end)) == want
    assert german["think_end"].isna().sum() == 1  # the thought the cap cut before it closed


def test_score_at_the_cap_counts_the_right_answers(run, tmp_path):
    out = tmp_path / "curves.json"
    args = ["score", "--ledger", str(run["ledger"]), "--parser", "lm-eval-strict", "--budgets", str(CAP)]
    res = CliRunner().invoke(cli, [*args, "--format", "json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    curves = {row["lang"]: row["accuracy"] for row in json.loads(out.read_text())}
    assert curves == pytest.approx({"deu_Latn": 3 / 6, "tha_Thai": 4 / 6})
    for task, code in LANGS.items():  # the same fractions, from the table above
        right = [ok for _, responses in DOCS[task] for _, _, ok in responses]
        assert curves[code] == pytest.approx(sum(right) / len(right))
