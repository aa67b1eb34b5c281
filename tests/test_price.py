"""Pricing the ladder on a ledger whose answer positions are known, so every Table 3 number is worked by hand.

World (see ``price_fixture``): a tiny byte-level BPE whose one-merge extension halves Thai text. Stored cap
(B_max) 64, priced cap B = 30, gold 7 everywhere, 10 items x 2 samples per arm. Trace types and their token
counts (base / extended):

NATIVE (Thai ``กา`` x k + answer)   k    base  ext  answer
  A  short, right                   5     17   12    7
  B  rescued by the extension      15     37   22    7
  C  rescued by the extension      20     47   27    7
  D  needs the longer cap          28     63   35    7
  E  wrong answer                  12     31   19    3
  F  hits B_max, never answers     40+    64   32    -   (stored ids cut at 64, finish_reason length)
TRANSLATE-ACT (English ``ab`` x k + answer; P has a Thai preamble ``กา`` x 10 then ``ab`` x 6)
  S  short, right                   5     17   17    7
  L  long, right                   20     47   47    7
  W  short, wrong                   5     17   17    3
  P  Thai preamble, right           -     39   29    7

Items (sample 0, sample 1): NATIVE 0,1: A A; 2,3: B A; 4: C E; 5,6: D A; 7: E E; 8: F F; 9: A F.
TRANSLATE 0-4: S S; 5,6: P S; 7: L W; 8,9: S S.

At B = 30: acc_N = 9/20 (the A traces), acc_N(B_max) = 14/20 (+B, C, D), acc_N^ext = 12/20 (+B, C);
acc_T = 16/20 (S), acc_T(B_max) = 19/20 (+P, L), acc_T^ext = 18/20 (+P). Hence G = 7/20, G_max = 5/20,
G3 = 6/20, closure = 1/20, NAT gain = 5/20, extension NATIVE gain = 3/20, NAT trunc = 11/20 (B, C, D, E, F
longer than 30), extended NAT trunc = 5/20 (D, F), B_max binds for 3/20 (F).
At B = 63 every trace but F fits and F never answers: the longer prefix recovers nothing, so the extension's
gain and the closure must be exactly zero although 3/20 NATIVE traces are still truncated.
"""

from __future__ import annotations

import importlib
import json
import shutil
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from mindcap_tok.adaptation.price import (
    GivenFolds,
    LearnedFolds,
    PricedTask,
    PriceSettings,
    SavedFolds,
    ledger_tasks,
    load_traces,
    price_ledger,
    price_traces,
    sample_items,
)
from mindcap_tok.adaptation.retokenize import FoldTokenizer
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.resample import Resampling, bootstrap_counts
from mindcap_tok.store.ledger import Ledger
from price_fixture import (
    ARMS,
    B_MAX,
    GOLD,
    WRONG,
    native_text,
    price_record,
    price_world,
    translate_text,
)
from task_files import integer_task

_f = Fraction
#: the module docstring's figures at B = 30, worked by hand
HAND_AT_30 = {
    "acc_native": _f(9, 20),
    "acc_native_max": _f(14, 20),
    "acc_native_ext": _f(12, 20),
    "acc_translate": _f(16, 20),
    "acc_translate_max": _f(19, 20),
    "acc_translate_ext": _f(18, 20),
    "G": _f(7, 20),
    "G_max": _f(5, 20),
    "G3": _f(6, 20),
    "closure": _f(1, 20),
    "nat_gain": _f(5, 20),
    "ext_nat_gain": _f(3, 20),
    "nat_trunc": _f(11, 20),
    "nat_trunc_ext": _f(5, 20),
    "nat_trunc_max": _f(3, 20),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return price_world(tmp_path_factory.mktemp("price"))


@pytest.fixture(scope="module")
def priced(world):
    ledger, base, _, folds = world
    return price_ledger(
        ledger,
        "tiny",
        lang="th",
        caps=[30, 63],
        extension=GivenFolds(folds),
        settings=PriceSettings(resampling=Resampling(400, 3), tokenizer=base),
    )


def test_hand_computed_table3_at_the_binding_cap(priced):
    row = priced.rows[0]
    assert row.cap == 30 and row.b_max == B_MAX and row.n_items == 10
    assert (row.n_native, row.n_translate) == (20, 20)
    for name, value in HAND_AT_30.items():
        assert getattr(row, name) == pytest.approx(float(value), abs=1e-12), name


@pytest.mark.parametrize(("task", "right", "wrong", "gold"), [("belebele", 3, 1, "3"), ("mmath", 3, 1, "3.0")])
def test_price_on_choice_and_math_tasks_by_hand(world, tmp_path, task, right, wrong, gold):
    """The same world as a Belebele ledger (labels 1-4, gold "3") and an MMATH one (gold "3.0", which math-verify
    finds equal to the traces' ``#### 3``): one-character answers keep every token count, so the figures at B = 30
    are the hand-worked ones of the module docstring."""
    _, base, _, folds = world
    records = []
    for arm, plan, text_of in ARMS:
        for item, kinds in enumerate(plan):
            for s, kind in enumerate(kinds):
                text = text_of(kind).replace(f"#### {WRONG}", f"#### {wrong}").replace(f"#### {GOLD}", f"#### {right}")
                records.append(price_record(base, arm, item, s, text) | {"task": task, "gold": None, "gold_text": gold})
    ledger = Ledger(tmp_path / "L")
    ledger.append(records, tokenizer=base)
    settings = PriceSettings(resampling=Resampling(400, 3), tokenizer=base)
    p = price_ledger(ledger, "tiny", lang="th", caps=[30], extension=GivenFolds(folds), settings=settings)
    row = p.rows[0]
    assert (row.n_native, row.n_translate) == (20, 20)
    for name, value in HAND_AT_30.items():
        assert getattr(row, name) == pytest.approx(float(value), abs=1e-12), name


def test_the_note_counts_finished_traces_that_are_not_canonical(world, priced, tmp_path):
    """Stored ids that are not the tokenizer's own encoding: one finished trace spelled in bytes (37 ids for 17
    tokens) is what the note counts; one cut trace ending inside a character (its text ends in U+FFFD) is not."""
    _, base, _, folds = world
    records = []
    for arm, plan, text_of in ARMS:
        for item, kinds in enumerate(plan):
            records += [price_record(base, arm, item, s, text_of(kind)) for s, kind in enumerate(kinds)]
    first = records[0]  # native item 0 sample 0, type A
    assert (first["arm"], first["item"], first["sample"], first["finish_reason"]) == ("native", 0, 0, "stop")
    first["output_ids"] = list(("กา" * 5).encode()) + base.tokenizer.encode("\n#### 7").ids  # byte ids = bytes
    cut = next(r for r in records if r["arm"] == "native" and r["item"] == 8)  # type F, cut at B_max
    cut["output_ids"] = [*cut["output_ids"][:63], "ก".encode()[0]]
    for rec in (first, cut):
        rec["text"] = base.tokenizer.decode(rec["output_ids"])
    assert cut["text"].endswith("\ufffd") and cut["finish_reason"] == "length"
    ledger = Ledger(tmp_path / "ledger")
    ledger.append(records, tokenizer=base)
    settings = PriceSettings(resampling=Resampling(100, 3), tokenizer=base)
    result = price_ledger(ledger, "tiny", lang="th", caps=[30], extension=GivenFolds(folds), settings=settings)
    (note,) = [n for n in result.notes if "re-encode" in n]
    assert note.startswith("note: 1 of 37 finished traces (2.70%) re-encode")  # 40 traces, 3 cut at B_max
    assert not [n for n in priced.notes if "re-encode" in n]  # the world's own ids are canonical


def test_no_recovery_means_exactly_zero_extension_gain(priced):
    row = priced.rows[1]
    assert row.cap == 63
    assert row.nat_trunc == pytest.approx(3 / 20)  # F still truncated ...
    assert row.nat_gain == 0.0  # ... but nothing is left to recover
    assert row.ext_nat_gain == 0.0 and row.closure == 0.0
    assert row.closure_ci_low == 0.0 and row.closure_ci_high == 0.0


def test_compression_per_fold_by_hand(priced):
    folds = {f.fold: f for f in priced.folds}
    # fold 0 = items 0-4: A x6 (17/12), B x2 (37/22), C (47/27), E (31/19)
    assert (folds[0].trace_tokens_base, folds[0].trace_tokens_ext) == (254, 162)
    # fold 1 = items 5-9: D x2 (63/35), A x3 (17/12), E x2 (31/19), F x3 (64/32)
    assert (folds[1].trace_tokens_base, folds[1].trace_tokens_ext) == (431, 240)


def test_closure_interval_matches_a_slow_item_bootstrap(world, priced):
    # reference: per replicate, reweight every item by its multiplicity and recompute the four accuracies
    weights = bootstrap_counts(10, 400, seed=3)
    per_item = {}
    for arm, plan, text_of in ARMS:
        for item, kinds in enumerate(plan):
            at_b = [int(text_of(k) in _RIGHT_AT_30_BASE) for k in kinds]
            ext = [int(text_of(k) in _RIGHT_AT_30_EXT) for k in kinds]
            per_item[arm, item] = (sum(at_b), sum(ext), len(kinds))
    closures = []
    for w in weights:
        acc = {}
        for arm in ("native", "translate-act"):
            n = sum(w[i] * per_item[arm, i][2] for i in range(10))
            acc[arm] = [sum(w[i] * per_item[arm, i][j] for i in range(10)) / n for j in (0, 1)]
        g = acc["translate-act"][0] - acc["native"][0]
        g3 = acc["translate-act"][1] - acc["native"][1]
        closures.append(g - g3)
    low, high = np.quantile(closures, [0.025, 0.975])
    row = priced.rows[0]
    assert row.closure_ci_low == pytest.approx(low) and row.closure_ci_high == pytest.approx(high)


# texts scoring 1 at B = 30 (from the table in the module docstring)
_RIGHT_AT_30_BASE = {native_text("A"), translate_text("S")}
_RIGHT_AT_30_EXT = {native_text(k) for k in "ABC"} | {translate_text(k) for k in "SP"}


def test_triage_states_each_rung_and_warns_that_b_max_binds(priced):
    text = "\n".join(priced.triage())
    assert "Raise the cap to 64: NATIVE recovers +25.0 points" in text
    assert "NATIVE gains +15.0 points at 30, 60% of what the longer cap recovers" in text
    assert "the gap closes by +5.0 points" in text
    assert "warning: B_max = 64 still binds (15.0% of NATIVE traces hit it)" in text
    assert "The longer prefix recovers nothing at 63" in text


def test_sample_keeps_whole_items_of_both_arms(world):
    ledger, base, _, folds = world
    p = price_ledger(
        ledger,
        "tiny",
        lang="th",
        caps=[30],
        extension=GivenFolds(folds),
        settings=PriceSettings(sample=4, resampling=Resampling(50, 1), tokenizer=base),
    )
    assert len(p.items) == 4 and p.sample == 4
    assert p.rows[0].n_items == 4 and p.rows[0].n_native == p.rows[0].n_translate == 8
    assert list(sample_items(range(10), 4, seed=1)) == list(p.items)
    assert list(sample_items(range(10), 4, seed=1)) != list(sample_items(range(10), 4, seed=2))


def test_items_without_a_held_out_fold_are_refused(world):
    ledger, base, ext, _ = world
    with pytest.raises(MindcapError, match="held out by no fold"):
        price_ledger(
            ledger,
            "tiny",
            lang="th",
            caps=[30],
            extension=GivenFolds([FoldTokenizer(ext, frozenset(range(5)), 0)]),
            settings=PriceSettings(tokenizer=base),
        )


def test_a_cell_mixing_tasks_is_refused(world, tmp_path):
    ledger, base, _, folds = world
    shutil.copytree(ledger.root, tmp_path / "L")
    mixed = Ledger(tmp_path / "L")
    mixed.append([price_record(base, "native", 0, 2, native_text("A")) | {"task": "my-task"}], tokenizer=base)
    # one pricing is one task's (the CLI prices each task of a model and language in turn)
    with pytest.raises(MindcapError, match=r"tiny tha_Thai records hold several tasks \(mgsm, my-task\); price one"):
        price_ledger(
            mixed, "tiny", lang="th", caps=[30], extension=GivenFolds(folds), settings=PriceSettings(tokenizer=base)
        )


def test_cap_above_the_stored_prefix_is_refused(world):
    ledger, base, _, folds = world
    traces = load_traces(ledger, "tiny", lang="th", tokenizer=base)
    with pytest.raises(MindcapError, match="exceeds the largest stored prefix 64"):
        price_traces(traces, folds, caps=[128])


def test_cli_json_learns_a_cross_fitted_extension(world, tmp_path):
    ledger, base, _, _ = world
    result = CliRunner().invoke(
        cli,
        [
            "price",
            "--ledger",
            str(ledger.root),
            "--model",
            "tiny",
            "--lang",
            "th",
            "--cap",
            "30",
            "--tokenizer",
            str(base.path),
            "--learn-extension",
            "--size",
            "1",
            "--no-premium",
            "--n-boot",
            "200",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    for key in (
        "lang",
        "cap",
        "G",
        "G_max",
        "G3",
        "nat_trunc",
        "nat_gain",
        "ext_nat_gain",
        "closure",
        "closure_ci_low",
        "closure_ci_high",
        "n_items",
    ):
        assert key in row
    # the learned merge is the hand-made one (ก+า is the most frequent pair in either half of the NATIVE traces)
    assert row["lang"] == "tha_Thai" and row["cap"] == 30 and row["n_items"] == 10
    assert row["G3"] == pytest.approx(6 / 20) and row["closure"] == pytest.approx(1 / 20)
    assert all(-1 <= row[k] <= 1 for k in ("G", "G_max", "G3", "closure", "nat_gain", "ext_nat_gain"))


def test_worker_processes_price_the_hand_computed_table(world, monkeypatch):
    # each fold's traces go to spawned workers (the size threshold lifted): the same hand-computed figures
    monkeypatch.setattr(importlib.import_module("mindcap_tok.adaptation.retokenize"), "PARALLEL_MIN_CHARS", 0)
    ledger, base, _, _ = world
    result = CliRunner().invoke(
        cli,
        [
            "price",
            "--ledger",
            str(ledger.root),
            "--model",
            "tiny",
            "--lang",
            "th",
            "--cap",
            "30",
            "--tokenizer",
            str(base.path),
            "--learn-extension",
            "--size",
            "1",
            "--no-premium",
            "--n-boot",
            "200",
            "--format",
            "json",
            "--workers",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["G"] == pytest.approx(7 / 20) and row["G3"] == pytest.approx(6 / 20)
    assert row["ext_nat_gain"] == pytest.approx(3 / 20) and row["closure"] == pytest.approx(1 / 20)


def test_cli_rejects_a_missing_language(world):
    ledger, base, _, _ = world
    result = CliRunner().invoke(
        cli,
        [
            "price",
            "--ledger",
            str(ledger.root),
            "--model",
            "tiny",
            "--lang",
            "de",
            "--cap",
            "30",
            "--tokenizer",
            str(base.path),
            "--learn-extension",
            "--size",
            "1",
            "--no-premium",
        ],
    )
    assert result.exit_code == 2
    assert "error: no native replay records for tiny deu_Latn" in result.output


def test_saved_extension_prices_like_the_learned_one(world, tmp_path):
    ledger, base, _, _ = world
    out = tmp_path / "th-ext"
    learned = price_ledger(
        ledger,
        "tiny",
        lang="th",
        caps=[30],
        extension=LearnedFolds(size=1, save_to=out),
        settings=PriceSettings(resampling=Resampling(50), tokenizer=base),
    )
    again = price_ledger(
        ledger,
        "tiny",
        lang="th",
        caps=[30],
        extension=SavedFolds(out),
        settings=PriceSettings(resampling=Resampling(50), tokenizer=base),
    )
    for p in (learned, again):
        row = p.rows[0]
        assert (row.G3, row.ext_nat_gain) == pytest.approx((6 / 20, 3 / 20))
    assert {f.fold for f in again.folds} == {0, 1}


def test_exactly_one_extension_source(world):
    """The source is one value of a union type (the type is the check); what is left to refuse at run
    time is a value of no source type, and a learned extension with neither a size nor a frequency rule."""
    ledger, base, _, folds = world
    with pytest.raises(MindcapError, match="extension must be GivenFolds, SavedFolds or LearnedFolds, got list"):
        price_ledger(ledger, "tiny", lang="th", caps=[30], extension=folds, settings=PriceSettings(tokenizer=base))
    with pytest.raises(MindcapError, match=r"needs a size .* or a minimum pair frequency"):
        LearnedFolds()


@pytest.fixture(scope="module")
def thai_extension(world, tmp_path_factory):
    """A cross-fitted extension learned on the Thai traces and saved by `price --save-extension`."""
    ledger, base, _, _ = world
    out = tmp_path_factory.mktemp("th") / "th-ext"
    price_ledger(
        ledger,
        "tiny",
        lang="th",
        caps=[30],
        extension=LearnedFolds(size=1, save_to=out),
        settings=PriceSettings(resampling=Resampling(40), tokenizer=base),
    )
    assert json.loads((out / "fold-0" / "manifest.json").read_text("utf-8"))["lang"] == "tha_Thai"
    return out


def _relabelled_ledger(world, folder, lang: str = "tha_Thai", tok=None):
    """The world's records again, stored with another language or under another tokenizer."""
    _, base, _, _ = world
    tok = tok or base
    records = []
    for arm, plan, text_of in ARMS:
        for item, kinds in enumerate(plan):
            records += [
                {**price_record(tok, arm, item, s, text_of(kind)), "lang": lang} for s, kind in enumerate(kinds)
            ]
    ledger = Ledger(folder)
    ledger.append(records, tokenizer=tok)
    return ledger


def test_an_extension_for_another_language_is_refused(world, thai_extension, tmp_path):
    _, base, _, _ = world
    swahili = _relabelled_ledger(world, tmp_path / "sw", "swh_Latn")
    with pytest.raises(MindcapError, match=r"learned for tha_Thai, but the priced language is swh_Latn"):
        price_ledger(
            swahili,
            "tiny",
            lang="sw",
            caps=[30],
            extension=SavedFolds(thai_extension),
            settings=PriceSettings(resampling=Resampling(40), tokenizer=base),
        )
    result = CliRunner().invoke(
        cli,
        [
            "price",
            "--ledger",
            str(swahili.root),
            "--model",
            "tiny",
            "--lang",
            "sw",
            "--cap",
            "30",
            "--tokenizer",
            str(base.path),
            "--extension",
            str(thai_extension),
        ],
    )
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: extension {thai_extension / 'fold-0'} was learned for tha_Thai, but the priced language is swh_Latn"
    ]


def test_an_extension_that_records_no_language_is_refused(world, thai_extension, tmp_path):
    import shutil

    ledger, base, _, _ = world
    bare = tmp_path / "bare"
    shutil.copytree(thai_extension / "fold-0", bare)
    manifest = json.loads((bare / "manifest.json").read_text("utf-8"))
    del manifest["lang"]
    (bare / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    with pytest.raises(MindcapError, match="records no language, so it cannot be checked against tha_Thai"):
        price_ledger(
            ledger, "tiny", lang="th", caps=[30], extension=SavedFolds(bare), settings=PriceSettings(tokenizer=base)
        )


def test_an_extension_of_another_base_tokenizer_is_refused(world, thai_extension, tmp_path):
    _, _, ext, _ = world  # the hand-extended tokenizer as the ids' tokenizer: not the extension's base
    other = _relabelled_ledger(world, tmp_path / "other", tok=ext)
    with pytest.raises(MindcapError, match=r"extends a base tokenizer with sha256 .*but the ledger's ids come from"):
        price_ledger(
            other,
            "tiny",
            lang="th",
            caps=[30],
            extension=SavedFolds(thai_extension),
            settings=PriceSettings(tokenizer=ext),
        )


def test_a_sample_larger_than_the_items_reports_the_items_used(world):
    ledger, base, _, folds = world
    p = price_ledger(
        ledger,
        "tiny",
        lang="th",
        caps=[30],
        extension=GivenFolds(folds),
        settings=PriceSettings(sample=5000, resampling=Resampling(50), tokenizer=base),
    )
    assert (p.sample, p.population, len(p.items)) == (10, 10, 10)
    assert p.record(p.rows[0])["sample"] == 10
    assert "note: a sample of 5000 items was asked for, but tiny tha_Thai has 10; all 10 are priced" in p.triage()
    assert "seeded sample" not in p.triage()[0]
    result = CliRunner().invoke(
        cli,
        [
            "price",
            "--ledger",
            str(ledger.root),
            "--model",
            "tiny",
            "--lang",
            "th",
            "--cap",
            "30",
            "--tokenizer",
            str(base.path),
            "--learn-extension",
            "--size",
            "1",
            "--no-premium",
            "--n-boot",
            "50",
            "--sample",
            "5000",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert (row["sample"], row["population"], row["n_items"]) == (10, 10, 10)
    assert "a sample of 5000 items was asked for" in result.stderr


def test_price_json_is_strict_where_the_share_is_undefined(world):
    ledger, base, _, _ = world
    result = CliRunner().invoke(
        cli,
        [
            "price",
            "--ledger",
            str(ledger.root),
            "--model",
            "tiny",
            "--lang",
            "th",
            "--cap",
            "63",
            "--tokenizer",
            str(base.path),
            "--learn-extension",
            "--size",
            "1",
            "--n-boot",
            "50",
            "--no-premium",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    # at 63 the longer prefix recovers nothing, so the extension's share of it is undefined: null, not NaN
    assert row["nat_gain"] == 0 and row["ext_share"] is None
    assert [f["premium_before"] for f in row["compression"]] == [None, None]


#: a user's task whose arms are ``direct`` (native) and ``english`` (comparator)
_USER_TASK = integer_task("plain2", ["tha_Thai"], native="direct")


def test_price_compares_the_tasks_own_arms(world, tmp_path):
    """The world's MGSM records, and a copy as a user task's ``direct``/``english`` arms, in one ledger: each task
    priced in its own arms gives the hand-worked figures at B = 30; without a task the pricing is refused."""
    ledger, base, _, folds = world
    task_file = tmp_path / "plain2.toml"
    task_file.write_text(_USER_TASK, "utf-8")
    shutil.copytree(ledger.root, tmp_path / "L")
    mixed = Ledger(tmp_path / "L")
    renamed = {"native": "direct", "translate-act": "english"}
    records = []
    for arm, plan, text_of in ARMS:
        for item, kinds in enumerate(plan):
            for s, kind in enumerate(kinds):
                records.append(price_record(base, renamed[arm], item, s, text_of(kind)) | {"task": "plain2"})
    mixed.append(records, tokenizer=base)
    assert ledger_tasks(mixed, "tiny", lang="th") == ["mgsm", "plain2"]
    for task in ("plain2", "mgsm"):
        settings = PriceSettings(resampling=Resampling(400, 3), tokenizer=base, task=PricedTask(task, [task_file]))
        p = price_ledger(mixed, "tiny", lang="th", caps=[30], extension=GivenFolds(folds), settings=settings)
        assert p.task == task and p.record(p.rows[0])["task"] == task
        assert (p.rows[0].n_native, p.rows[0].n_translate) == (20, 20)
        for name, value in HAND_AT_30.items():
            assert getattr(p.rows[0], name) == pytest.approx(float(value), abs=1e-12), (task, name)
    with pytest.raises(MindcapError, match=r"hold several tasks \(mgsm, plain2\)"):
        price_ledger(mixed, "tiny", lang="th", caps=[30], extension=GivenFolds(folds), settings=PriceSettings())
