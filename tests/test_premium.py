"""Premiums: hand-worked cases, the paper's published figures, and the bootstrap against scipy."""

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tokenizers import Tokenizer, models, pre_tokenizers

from mindcap_tok.premium import count_tokens, ratio_bootstrap, token_premium
from mindcap_tok.resample import Resampling, bootstrap_counts, bootstrap_sums, scale_budget
from mindcap_tok.tokenization.load import ResolvedTokenizer


def _whitespace_tokenizer() -> ResolvedTokenizer:
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return ResolvedTokenizer(name="ws", tokenizer=tok, source="test")


def _flores(root, files):
    for code, lines in files.items():
        folder = root / "devtest"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{code}.devtest").write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")
    return str(root)


def test_hand_worked_premium(tmp_path):
    # English: 2 + 3 + 1 = 6 words; Thai-stand-in: 4 + 6 + 5 = 15 words -> r = 15/6 = 2.5 exactly
    src = _flores(
        tmp_path,
        {
            "eng_Latn": ["a b", "a b c", "a"],
            "tha_Thai": ["x x x x", "x x x x x x", "x x x x x"],
            "deu_Latn": ["y y", "y y y", "y"],
        },
    )
    res = token_premium(
        _whitespace_tokenizer(), ["th", "de"], source=src, resampling=Resampling(200, 1), budgets=[64, 100, 256]
    )
    th, de = res
    assert (th.lang, th.tokens, th.ref_tokens, th.n_pairs) == ("tha_Thai", 15, 6, 3)
    assert th.premium == 2.5 and th.ratio == Fraction(5, 2)
    assert th.scaled_budgets == {64: 160, 100: 250, 256: 640}
    # identical per-pair counts: every resample gives exactly 1.0
    assert de.premium == 1.0 and de.ci_low == 1.0 and de.ci_high == 1.0
    # Thai: each resample ratio lies between the smallest and largest per-pair ratio (2 and 5)
    assert 2.0 <= th.ci_low <= 2.5 <= th.ci_high <= 5.0


def test_scale_budget_is_exact():
    assert scale_budget(Fraction(2550777, 1000000), 256) == 652  # the paper's Thai example: 652
    assert scale_budget(2.55, 100) == 255  # 2.55 as typed, not 2.5499999... in binary
    assert scale_budget(1.56, 192) == 299
    assert scale_budget(Fraction(7, 3), 3) == 7


def test_bootstrap_counts_reproducible_and_multinomial():
    a = bootstrap_counts(50, 400, seed=7)
    assert np.array_equal(a, bootstrap_counts(50, 400, seed=7))
    assert not np.array_equal(a, bootstrap_counts(50, 400, seed=8))
    assert (a.sum(axis=1) == 50).all()
    # each count ~ Binomial(50, 1/50): mean 1, variance 49/50
    assert abs(a.mean() - 1.0) < 1e-12
    assert abs(a.var() - 0.98) < 0.05


@pytest.mark.parametrize(("n", "n_boot", "seed"), [(1012, 1000, 0), (7, 999, 3), (1, 10, 1), (2009, 300, 9)])
def test_bootstrap_sums_equal_the_resampling_matrix_product(n, n_boot, seed):
    # drawn in blocks, the sums must be exactly those of the one shared resampling matrix
    values = np.random.default_rng(n).integers(0, 500, size=(n, 4)).astype(np.float64)
    assert np.array_equal(bootstrap_sums(values, n_boot, seed=seed), bootstrap_counts(n, n_boot, seed=seed) @ values)


def test_ratio_ci_agrees_with_scipy_percentile_bootstrap():
    rng = np.random.default_rng(3)
    ref = rng.integers(10, 40, size=300)
    lang = (ref * rng.uniform(1.5, 3.5, size=300)).astype(int)
    low, high = ratio_bootstrap(lang[:, None], ref, resampling=Resampling(20000, 0, 0.95))
    sp = stats.bootstrap(
        (lang, ref),
        lambda a, b, axis=-1: a.sum(axis=axis) / b.sum(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=20000,
        method="percentile",
        random_state=1,
    )
    # both are Monte Carlo estimates of the same quantiles: agree within a small fraction of the CI width
    width = sp.confidence_interval.high - sp.confidence_interval.low
    assert abs(low[0] - sp.confidence_interval.low) < 0.05 * width
    assert abs(high[0] - sp.confidence_interval.high) < 0.05 * width


def test_reproducible_for_a_seed(qwen, flores_dir):
    a = token_premium(qwen, ["th"], source=flores_dir, resampling=Resampling(500, 11))
    b = token_premium(qwen, ["th"], source=flores_dir, resampling=Resampling(500, 11))
    c = token_premium(qwen, ["th"], source=flores_dir, resampling=Resampling(500, 12))
    assert a == b
    assert (a[0].ci_low, a[0].ci_high) != (c[0].ci_low, c[0].ci_high)
    assert a[0].seed == 11 and a[0].n_boot == 500


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # paper §3: "Qwen de 1.56 / th 2.55 / sw 1.94 and Llama de 1.58 / th 2.19 / sw 1.93"
        ("qwen3-8b", {"deu_Latn": 1.56, "tha_Thai": 2.55, "swh_Latn": 1.94}),
        ("llama-3.1-8b", {"deu_Latn": 1.58, "tha_Thai": 2.19, "swh_Latn": 1.93}),
    ],
)
def test_reproduces_paper_premiums(model, expected, config, flores_dir):
    from mindcap_tok.tokenization.load import load_tokenizer

    tok = load_tokenizer(model, config.tokenizers_dir.value)
    res = {r.lang: r for r in token_premium(tok, ["de", "th", "sw"], source=flores_dir, resampling=Resampling(1000, 0))}
    for code, value in expected.items():
        assert round(res[code].premium, 2) == value, (code, res[code].premium)
        assert res[code].ci_low < res[code].premium < res[code].ci_high
        assert res[code].n_pairs == 1012


def test_qwen_thai_premium_matches_paper_precision(qwen, flores_dir):
    # paper §4.2 prints r = 2.550777 for Qwen Thai, and §6 prints 1.559 / 2.551 / 1.936
    rows = token_premium(qwen, ["de", "th", "sw"], source=flores_dir, resampling=Resampling(40, 0), budgets=[256])
    res = {r.lang: r for r in rows}
    assert round(res["tha_Thai"].premium, 6) == 2.550777
    assert res["tha_Thai"].scaled_budgets == {256: 652}
    assert round(res["deu_Latn"].premium, 3) == 1.559
    assert round(res["swh_Latn"].premium, 3) == 1.936


def test_count_tokens_excludes_special_tokens(llama):
    # Llama's post-processor adds <|begin_of_text|> by default; premiums must not count it
    assert count_tokens(llama.tokenizer, ["Hello world"]).tolist() == [2]


def test_public_api_names_the_function_after_any_import_order():
    # importing stages that import the premium module must not turn the package's public names into modules
    import subprocess
    import sys

    code = (
        "import mindcap_tok.stats, mindcap_tok.generation.jobs, mindcap_tok.audits\n"
        "from mindcap_tok import token_premium\n"
        "from mindcap_tok.premium import Premium\n"
        "from mindcap_tok.resample import scale_budget\n"
        "import inspect; assert inspect.isfunction(token_premium) and inspect.isfunction(scale_budget), 'module'\n"
        "assert token_premium.__module__ == 'mindcap_tok.premium' and scale_budget(2.55, 100) == 255\n"
        "assert inspect.isclass(Premium)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_premium_table_names_tokenizer_hash_and_engine(config):
    import hashlib

    from click.testing import CliRunner

    from mindcap_tok.cli.main import cli

    def sha(path):
        return hashlib.sha256((config.tokenizers_dir.value / path).read_bytes()).hexdigest()[:12]

    res = CliRunner().invoke(cli, ["premium", "--model", "qwen3-8b", "gemma-3", "--lang", "th", "--n-boot", "40"])
    assert res.exit_code == 0, res.output
    assert f"qwen3-8b: tokenizer sha256 {sha('qwen3/tokenizer.json')}…, counted by tokenizers" in res.output
    assert f"gemma-3: tokenizer sha256 {sha('gemma3/tokenizer.model')}…, counted by sentencepiece" in res.output
