"""Statistics refuse what they cannot support: an interval needs n_boot >= ceil(2/(1 − level)) resamples, and a
premium-scaled budget floor(r·B) obeys the 2^31 − 1 budget limit like every other budget.

Ledger (Qwen3 ids, ``early_late_records``): see tests/test_result_checks.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from ledger_factory import early_late_records
from mindcap_tok.cli.main import cli
from mindcap_tok.data.flores import load_parallel
from mindcap_tok.errors import MindcapError
from mindcap_tok.premium import count_tokens, ratio_bootstrap, token_premium
from mindcap_tok.resample import Resampling, check_resamples, min_resamples, scale_budget
from mindcap_tok.stats.bootstrap import item_bootstrap
from mindcap_tok.store.ledger import Ledger

MAX_BUDGET = 2**31 - 1


def run(args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, qwen):
    root = tmp_path_factory.mktemp("nboot") / "L"
    Ledger(root).append(early_late_records(qwen), qwen)
    return root


def test_minimum_worked_by_hand():
    # each tail (1 − level)/2 of n resamples must hold one: n >= 2/(1 − level)
    assert [min_resamples(x) for x in (0.5, 0.8, 0.9, 0.95, 0.99)] == [4, 10, 20, 40, 200]
    check_resamples(40, 0.95)
    with pytest.raises(MindcapError, match=r"--n-boot .*39 .*at least 40"):
        check_resamples(39, 0.95)


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_smallest_allowed_interval_contains_the_premium_on_flores(qwen, flores_dir, level):
    """With the minimum, the lower end needs about two resamples below the estimate: it fails with probability
    about (n + 1)/2^n, 2e-5 at level 0.9 (n = 20) and less above, so 20 seeds x 3 languages all hold."""
    texts = load_parallel(["tha_Thai", "deu_Latn", "swh_Latn"], split="devtest", source=flores_dir)
    ref = count_tokens(qwen, texts["eng_Latn"])
    counts = np.column_stack([count_tokens(qwen, texts[c]) for c in ("tha_Thai", "deu_Latn", "swh_Latn")])
    premium = counts.sum(axis=0) / ref.sum()
    n = min_resamples(level)
    for seed in range(20):
        low, high = ratio_bootstrap(counts, ref, resampling=Resampling(n, seed, level))
        assert np.all(low <= premium) and np.all(premium <= high), (seed, low, premium, high)


def test_smallest_allowed_interval_contains_accuracy_on_mgsm_sized_items():
    rng = np.random.default_rng(0)
    correct = rng.binomial(4, 0.6, size=(250, 3)).astype(float)  # 250 items × 4 samples, three cells
    for seed in range(20):
        boot = item_bootstrap(correct, np.full_like(correct, 4.0), n_boot=min_resamples(0.95), seed=seed)
        low, high = boot.ci(0.95)
        assert np.all(low <= boot.estimate) and np.all(boot.estimate <= high)


def test_library_refuses_too_few_resamples(qwen, flores_dir):
    with pytest.raises(MindcapError, match=r"--n-boot 5 is too few resamples for level 0\.95: need at least 40"):
        token_premium(qwen, ["th"], source=flores_dir, resampling=Resampling(5))
    with pytest.raises(MindcapError, match=r"need at least 10"):
        item_bootstrap(np.ones((5, 1)), n_boot=9, seed=0).ci(0.8)
    # n_boot=0: the premium alone, no interval (what callers needing only the ratio ask for)
    (row,) = token_premium(qwen, ["th"], source=flores_dir, resampling=Resampling(0))
    assert row.ci_low is None and row.ci_high is None and row.n_boot == 0 and row.premium > 2


def _one_line_refusal(res, minimum: int):
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "--n-boot" in lines[0] and f"at least {minimum}" in lines[0], res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize(
    ("args", "minimum"),
    [
        (["premium", "--lang", "th", "--n-boot", "5"], 40),
        (["premium", "--lang", "th", "--n-boot", "39", "--level", "0.95"], 40),
        (["premium", "--lang", "th", "--n-boot", "150", "--level", "0.99"], 200),
        (["sweep", "--ledger", "{L}", "--premiums", "th=3", "--budgets", "30", "--n-boot", "5"], 40),
        (["sweep", "--ledger", "{L}", "--premiums", "th=3", "--budgets", "30", "--n-boot", "9", "--level", "0.8"], 10),
        (
            ["report", "--ledger", "{L}", "--premiums", "th=3", "--budgets", "30", "--n-boot", "3", "--out-dir", "{O}"],
            40,
        ),
        (
            [
                "price",
                "--ledger",
                "{L}",
                "--lang",
                "th",
                "--cap",
                "30",
                "--learn-extension",
                "--no-premium",
                "--n-boot",
                "4",
            ],
            40,
        ),
        (
            [
                "audit",
                "--ledger",
                "{L}",
                "--only",
                "parser",
                "--premiums",
                "th=3",
                "--budgets",
                "30",
                "--n-boot",
                "5",
                "--out-dir",
                "{O}",
            ],
            40,
        ),
        (["extend", "--lang", "th", "--size", "1", "--n-boot", "5", "--out-dir", "{O}"], 40),
    ],
)
def test_commands_refuse_too_few_resamples_in_one_line(ledger, tmp_path, args, minimum):
    args = [a.replace("{L}", str(ledger)).replace("{O}", str(tmp_path / "out")) for a in args]
    _one_line_refusal(run(args), minimum)
    assert not (tmp_path / "out").exists()


def test_protocol_refuses_too_few_resamples_for_its_alpha(tmp_path):
    from mindcap_tok.stats.protocol import load_protocol

    path = tmp_path / "p.toml"
    body = (
        'name = "p"\nalpha = {alpha}\nn_boot = {n}\n'
        '[[hypotheses]]\nid = "H1"\nkind = "delta"\nlang = "th"\nbudget = 30\n'
    )
    path.write_text(body.format(alpha=0.05, n=40))
    assert load_protocol(path).n_boot == 40
    path.write_text(body.format(alpha=0.05, n=39))
    with pytest.raises(MindcapError, match=r"p\.toml: n_boot 39 is too few .*at least 40.*1 - alpha"):
        load_protocol(path)
    path.write_text(body.format(alpha=0.01, n=100))
    with pytest.raises(MindcapError, match=r"at least 200"):
        load_protocol(path)


def test_scaled_budget_above_the_limit_is_refused():
    # 2.55 · 842150450 = 2147483647.5, floor 2^31 − 1: the largest allowed; 2.55 · 842150451 = 2147483650.05 is over
    assert scale_budget(2.55, 842150450) == 2147483647
    with pytest.raises(MindcapError, match=r"budget 842150451 scales to floor\(r·B\) = 2147483650 .*842150450"):
        scale_budget(2.55, 842150451)


def test_premium_refuses_a_scaled_budget_above_the_limit_in_one_line():
    res = run(["premium", "--lang", "th", "--n-boot", "40", "--budgets", str(MAX_BUDGET)])
    assert res.exit_code == 2, res.output
    (line,) = res.output.strip().splitlines()
    assert f"budget {MAX_BUDGET} scales to" in line and f"above the largest budget {MAX_BUDGET}" in line
    ok = run(["premium", "--lang", "th", "--n-boot", "40", "--budgets", "256", "--format", "json"])
    assert ok.exit_code == 0 and '"256": 652' in ok.output  # the README's floor(2.5508 · 256)
