"""`load_scored_ledger`: the library's read + check + score of a ledger, which `sweep`, `report` and `protocol test`
start from. The ledger's answer positions are known by construction (ledger_factory.early_late_records):
acc_N(30) = 4/8, acc_N(90) = 7/8, acc_T(30) = 1."""

from __future__ import annotations

from fractions import Fraction

import pytest

import mindcap_tok
from ledger_factory import early_late_records
from mindcap_tok import MindcapError
from mindcap_tok.stats import LedgerSelection, load_scored_ledger, sweep_budgets
from mindcap_tok.store.ledger import Ledger


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, qwen):
    root = tmp_path_factory.mktemp("ledger")
    Ledger(root).append(early_late_records(qwen), qwen)
    return root


def _load(ledger, config, **selection):
    return load_scored_ledger(
        ledger,
        sweep_budgets([30]),
        tokenizers_dir=config.tokenizers_dir.value,
        data_dir=config.data_dir.value,
        premium_specs=["th=3"],
        selection=LedgerSelection(**selection),
    )


def test_scores_at_the_sweep_budgets_match_the_hand_worked_accuracies(ledger, config):
    scored = _load(ledger, config)
    assert scored.scores.budgets == (30, 90)  # B and floor(3 * 30)
    assert list(scored.premiums.values()) == [Fraction(3)]
    acc = scored.scores.by_budget.groupby(["arm", "budget"])["score"].mean()
    assert acc[("native", 30)] == 4 / 8 and acc[("native", 90)] == 7 / 8
    assert acc[("translate-act", 30)] == 1 and acc[("translate-act", 90)] == 1
    assert len(scored.scores.by_record) == 16


def test_the_selection_filters_records_and_an_empty_one_is_a_one_line_error(ledger, config):
    scored = _load(ledger, config, langs=["th"], models=["qwen3-8b"])
    assert len(scored.scores.by_record) == 16
    with pytest.raises(
        MindcapError, match=r"no records in .* match --model llama-3\.1-8b \(the ledger holds qwen3-8b\)$"
    ):
        _load(ledger, config, models=["llama-3.1-8b"])


def test_progress_reports_running_counts_up_to_the_number_of_records(ledger, config):
    seen = []
    load_scored_ledger(
        ledger,
        lambda premiums, models, langs: [30],
        tokenizers_dir=config.tokenizers_dir.value,
        data_dir=config.data_dir.value,
        premium_specs=["th=3"],
        on_progress=lambda done, total: seen.append((done, total)),
    )
    assert seen and seen[-1] == (16, 16)


def test_it_is_in_the_stats_namespace():
    assert {"load_scored_ledger", "LedgerSelection", "ScoredLedger", "sweep_budgets"} <= set(mindcap_tok.stats.__all__)
