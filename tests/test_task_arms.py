"""Every command compares each task's own native and comparator arms (issue 22): a user's task whose arms are
``direct``/``english`` beside an MGSM cell, in one ledger, through score, sweep, report, protocol, consistency,
confirm and price, with no arm flag. Expected values are worked by hand from the token positions (see ``_ledger``)."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from ledger_factory import FILLER, make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.stats.curves import sweep
from mindcap_tok.stats.roles import arm_mask
from mindcap_tok.store.ledger import Ledger
from task_files import integer_task

#: a user's task: native arm ``direct``, comparator ``english`` (integer answers, German items)
USER_TASK = integer_task("plain2", ["deu_Latn", "tha_Thai"], native="direct", comparator_reasoning="eng_Latn")

#: (task, arm) -> per item, per sample: "early" (answers within 30 tokens), "late" (between 30 and 90), "wrong"
PLAN = {
    ("plain2", "direct"): [["early"] * 2, ["early"] * 2, ["late"] * 2, ["late", "wrong"]],
    ("plain2", "english"): [["early"] * 2] * 4,
    ("mgsm", "native"): [["early"] * 2, ["late"] * 2, ["late"] * 2, ["late"] * 2],
    ("mgsm", "translate-act"): [["wrong"] * 2, ["wrong"] * 2, ["early"] * 2, ["early"] * 2],
}
#: by hand from PLAN, at B = 30 and floor(3·30) = 90 (premium 3): (acc_N(30), acc_N(90), acc_T(30))
HAND = {"plain2": (4 / 8, 7 / 8, 8 / 8), "mgsm": (2 / 8, 8 / 8, 4 / 8)}


def _text(kind: str, gold: int) -> str:
    late = FILLER * 4 if kind == "late" else ""
    return late + f"Answer line:\n#### {gold + (kind == 'wrong')}\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory, qwen):
    root = tmp_path_factory.mktemp("taskarms")
    task_file = root / "plain2.toml"
    task_file.write_text(USER_TASK, "utf-8")
    records = []
    for (task, arm), plan in PLAN.items():
        for item, kinds in enumerate(plan):
            for sample, kind in enumerate(kinds):
                rec = make_record(
                    qwen, _text(kind, 10 + item), arm=arm, lang="deu_Latn", item=item, sample=sample, gold=10 + item
                )
                n = len(rec["output_ids"])
                assert n < 30 if kind != "late" else 30 < n - 3 < 90  # the answer line ends within the window
                records.append(rec | {"task": task})
    Ledger(root / "L").append(records, qwen)
    return root / "L", task_file, root


def run(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _by_task(rows: list[dict]) -> dict[str, dict]:
    return {r["task"]: r for r in rows}


def test_score_reads_the_user_task(world):
    ledger, task_file, _ = world
    res = run("score", "--ledger", ledger, "--budgets", "30,90", "--task", task_file, "--format", "json")
    assert res.exit_code == 0, res.output
    acc = {(r["task"], r["arm"], r["budget"]): r["accuracy"] for r in json.loads(res.output)}
    assert acc[("plain2", "direct", 30)] == pytest.approx(4 / 8) and acc[("plain2", "direct", 90)] == 7 / 8
    assert acc[("plain2", "english", 30)] == 1 and acc[("mgsm", "translate-act", 30)] == pytest.approx(4 / 8)


def test_sweep_pairs_each_tasks_own_arms(world):
    ledger, task_file, _ = world
    args = ("sweep", "--ledger", ledger, "--premiums", "de=3", "--budgets", "30", "--n-boot", "200")
    res = run(*args, "--task", task_file, "--format", "json")
    assert res.exit_code == 0, res.output
    rows = _by_task(json.loads(res.output)["rows"])
    assert set(rows) == {"plain2", "mgsm"}
    for task, (at_b, at_rb, translate) in HAND.items():
        row = rows[task]
        assert (row["budget"], row["scaled_budget"]) == (30, 90)
        assert row["acc_native"] == pytest.approx(at_b) and row["acc_native_scaled"] == pytest.approx(at_rb)
        assert row["delta"] == pytest.approx(at_rb - at_b) and row["gap"] == pytest.approx(translate - at_b)
    # without the task file the user's task cannot be read: a one-line error asking for it
    res = run(*args)
    assert res.exit_code != 0 and "plain2" in res.output and "--task FILE" in res.output
    assert "Traceback" not in res.output


def test_sweep_with_per_task_arms_equals_explicit_arms(world, qwen):
    """The library with each task's arms gives, for the user's task, what explicit arms give on its cells alone."""
    ledger, task_file, _ = world
    from mindcap_tok.scoring.score import score_ledger

    table = Ledger(ledger).read()
    scores = score_ledger(table, qwen, budgets=[30, 90], tasks=[task_file])
    mixed = sweep(
        scores.by_budget,
        {"deu_Latn": 3.0},
        budgets=[30],
        native={"plain2": "direct", "mgsm": "native"},
        translate={"plain2": "english", "mgsm": "translate-act"},
    )
    alone = scores.by_budget[scores.by_budget["task"] == "plain2"]
    explicit = sweep(alone, {"deu_Latn": 3.0}, budgets=[30], native="direct", translate="english")
    got = mixed.rows[mixed.rows["task"] == "plain2"].reset_index(drop=True)
    for col in ("acc_native", "acc_native_scaled", "delta", "acc_translate", "gap"):
        assert got[col].tolist() == pytest.approx(explicit.rows[col].tolist()), col
    # a cell without its task cannot be given a per-task arm
    with pytest.raises(MindcapError, match="the tasks' arms differ"):
        arm_mask(scores.by_budget.drop(columns=["task"]), {"plain2": "direct", "mgsm": "native"})


def test_report_tables_carry_each_task(world, tmp_path):
    ledger, task_file, _ = world
    out = tmp_path / "rep"
    res = run(
        "report",
        "--ledger",
        ledger,
        "--premiums",
        "de=3",
        "--budgets",
        "30",
        "--n-boot",
        "200",
        "--task",
        task_file,
        "--out-dir",
        out,
    )
    assert res.exit_code == 0, res.output
    with open(out / "sweep.csv", encoding="utf-8") as fh:
        rows = _by_task(list(csv.DictReader(fh)))
    for task, (at_b, at_rb, translate) in HAND.items():
        assert float(rows[task]["delta"]) == pytest.approx(at_rb - at_b)
        assert float(rows[task]["gap"]) == pytest.approx(translate - at_b)
    assert "| plain2 |" in (out / "report.md").read_text("utf-8")


def test_report_figures_tell_two_tasks_in_one_language_apart(world, tmp_path, monkeypatch):
    """Both tasks are German: each figure draws a curve per task, labelled with it, at the accuracies of HAND."""
    from figure_checks import covered_points, overprinted
    from mindcap_tok.report import budget_figures

    ledger, task_file, _ = world
    caught = {}
    monkeypatch.setattr(budget_figures, "save_figure", lambda fig, path, **kw: caught.update({path.name: fig}))
    res = run(
        "report",
        "--ledger",
        ledger,
        "--premiums",
        "de=3",
        "--budgets",
        "30",
        "--n-boot",
        "200",
        "--task",
        task_file,
        "--out-dir",
        tmp_path / "rep",
    )
    assert res.exit_code == 0, res.output
    native, gap = (
        {line.get_label(): line for line in caught[name].axes[0].get_lines()}
        for name in ("native_curves.png", "gap_curves.png")
    )
    for curves in (native, gap):  # matplotlib names unlabelled lines (peak markers, the zero line) "_child…"
        assert {label for label in curves if not label.startswith("_")} == {"de (plain2)", "de (mgsm)"}
    for task, (at_b, at_rb, translate) in HAND.items():
        x, y = native[f"de ({task})"].get_data()
        assert dict(zip(x, y, strict=True)) == {30: pytest.approx(100 * at_b), 90: pytest.approx(100 * at_rb)}
        assert list(gap[f"de ({task})"].get_ydata()) == [pytest.approx(100 * (translate - at_b))]
    caption = caught["gap_curves.png"].texts[-1].get_text()
    # plain2's per-item gaps at B = 30 are 0, 0, 1, 1: a resample of the two 0 items alone has chance 1/16 > 2.5%,
    # so the 95% CI reaches 0 and no lead is claimed; mgsm's are −1, 0, 1, 1: its CI holds 0 too
    assert "de (plain2): no clear difference at any budget" in caption
    assert "de (mgsm): no clear difference at any budget" in caption
    for name, fig in caught.items():
        assert overprinted(fig) == [] and covered_points(fig) == [], name


def _protocol(root, body: str, top: str = ""):
    proto = root / "p.toml"
    proto.write_text(f'name = "arms"\nn_boot = 300\nseed = 1\n{top}[premiums]\nde = 3\n' + body, "utf-8")
    assert run("protocol", "freeze", proto, "--no-tag").exit_code == 0
    return proto


def test_protocol_tests_each_tasks_arms(world, tmp_path):
    ledger, task_file, _ = world
    proto = _protocol(
        tmp_path,
        '[[hypotheses]]\nid = "H1"\nkind = "delta"\nlang = "de"\nbudget = 30\ntask = "plain2"\n'
        '[[hypotheses]]\nid = "H2"\nkind = "gap"\nlang = "de"\nbudget = 30\ntask = "mgsm"\n',
    )
    res = run("protocol", "test", proto, "--ledger", ledger, "--task", task_file, "--format", "json")
    assert res.exit_code == 0, res.output
    est = {d["id"]: d["estimate"] for d in json.loads(res.output)["decisions"]}
    assert est["H1"] == pytest.approx(3 / 8) and est["H2"] == pytest.approx(4 / 8 - 2 / 8)


def test_protocol_declared_arms_override(world, tmp_path):
    """native = "english" in the file: Δ_L of the english arm, which answers early everywhere: exactly 0."""
    ledger, task_file, _ = world
    proto = _protocol(
        tmp_path,
        '[[hypotheses]]\nid = "H1"\nkind = "delta"\nlang = "de"\nbudget = 30\ntask = "plain2"\n',
        top='native = "english"\ntranslate = "direct"\n',
    )
    res = run("protocol", "test", proto, "--ledger", ledger, "--task", task_file, "--format", "json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["decisions"][0]["estimate"] == 0


def test_protocol_without_a_task_on_a_mixed_ledger_is_refused(world, tmp_path):
    ledger, task_file, _ = world
    proto = _protocol(tmp_path, '[[hypotheses]]\nid = "H1"\nkind = "delta"\nlang = "de"\nbudget = 30\n')
    res = run("protocol", "test", proto, "--ledger", ledger, "--task", task_file)
    assert res.exit_code != 0 and "the tasks' arms differ" in res.output and "give the hypothesis a task" in res.output
    assert "Traceback" not in res.output


def test_consistency_checks_each_tasks_native_arm(world, qwen):
    ledger, task_file, _ = world
    from mindcap_tok.scoring.score import score_ledger
    from mindcap_tok.stats.consistency import Splits, consistency

    args = ("--premiums", "de=3", "--budgets", "30", "--splits", "3", "--seed", "4", "--format", "json")
    res = run("consistency", "--ledger", ledger, *args, "--task", task_file)
    assert res.exit_code == 0, res.output
    cells = _by_task(json.loads(res.output)["cells"])
    assert set(cells) == {"plain2", "mgsm"}
    scores = score_ledger(Ledger(ledger).read(), qwen, budgets=[30, 90], tasks=[task_file])
    for task, native in (("plain2", "direct"), ("mgsm", "native")):
        keep = scores.by_record["task"] == task
        alone = type(scores)(
            scores.by_budget[scores.by_budget["task"] == task], scores.by_record[keep], *list(vars(scores).values())[2:]
        )
        ref = consistency(alone, {"deu_Latn": 3.0}, budgets=[30], splits=Splits(3, 4), native=native).cells.iloc[0]
        assert cells[task]["mae"] == pytest.approx(ref["mae"]) and cells[task]["peak_agree"] == ref["peak_agree"]


@pytest.fixture(scope="module")
def independent(tmp_path_factory, qwen):
    """The world's texts decoded again at caps 30 and 90, one decode per cap: a trace's fate at a cap is its
    replay prefix's, so the independent Δ_L is the replay one (plain2: 7/8 − 4/8, mgsm: 8/8 − 2/8)."""
    root = tmp_path_factory.mktemp("taskarms-independent")
    records = []
    for cap in (30, 90):
        for (task, arm), plan in PLAN.items():
            for item, kinds in enumerate(plan):
                for sample, kind in enumerate(kinds):
                    rec = make_record(
                        qwen,
                        _text(kind, 10 + item),
                        arm=arm,
                        lang="deu_Latn",
                        item=item,
                        sample=sample,
                        gold=10 + item,
                        cap=cap,
                    )
                    records.append(rec | {"task": task})
    Ledger(root / "I").append(records, qwen)
    return root / "I"


def test_confirm_checks_each_tasks_native_arm(world, independent):
    ledger, task_file, _ = world
    args = ("confirm", "--replay", ledger, "--independent", independent, "--premiums", "de=3", "--budgets", "30")
    res = run(*args, "--n-boot", "200", "--task", task_file, "--format", "json")
    assert res.exit_code == 0, res.output
    rows = _by_task(json.loads(res.output)["rows"])
    assert set(rows) == {"plain2", "mgsm"}
    for task, (at_b, at_rb, _) in HAND.items():
        assert rows[task]["predicted"] == pytest.approx(at_rb - at_b)
        assert rows[task]["independent"] == pytest.approx(at_rb - at_b)
        assert rows[task]["subcdf_predicted"] == pytest.approx(at_rb - at_b)


def test_a_statistic_given_no_arms_takes_each_tasks_own():
    """``native``/``translate`` left out: each task's arms from its task file (MGSM's, a built-in task, for records
    that name none); a user's task, whose file only the caller has, is a one-line error asking for it."""
    import pandas as pd

    from mindcap_tok.stats.roles import comparator_of, native_of

    cells = pd.DataFrame({"arm": ["native", "translate-act"], "task": ["mgsm", "belebele"]})
    assert native_of(cells, None) == {"mgsm": "native", "belebele": "native"}
    assert comparator_of(cells, None) == {"mgsm": "translate-act", "belebele": "translate-act"}
    assert native_of(cells.drop(columns="task"), None) == {"mgsm": "native"}
    assert native_of(cells, {"plain2": "direct"}) == {"plain2": "direct"}  # given arms are kept as given
    with pytest.raises(MindcapError, match="records of task 'plain2', which is not built in") as info:
        comparator_of(pd.DataFrame({"arm": ["direct"], "task": ["plain2"]}), None)
    assert "\n" not in str(info.value)
