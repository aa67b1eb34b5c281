"""Bad input meets one-line errors: job specs with wrong types (bools for ints, ints for bools, tables for lists,
non-finite premiums, non-UTF-8 files), absurd sizes that must not be materialised, and empty FLORES files."""

from __future__ import annotations

import os
import random
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from tokenizers import Tokenizer, models, pre_tokenizers

from conftest import REPO
from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.data.flores import load_parallel
from mindcap_tok.errors import MindcapError
from mindcap_tok.generation.generate import dry_run
from mindcap_tok.generation.jobs import MAX_CAP, MAX_K, job_counts, load_spec, parse_spec, plan_job
from mindcap_tok.premium import token_premium
from mindcap_tok.resample import Resampling
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.load import ResolvedTokenizer

BASE = 'model = "org/m"\narms = ["native"]\nlangs = ["de"]\n'
REPLAY = BASE + 'design = "replay"\n'
IND = BASE + 'design = "independent"\ncaps = [64]\n'


def spec_file(tmp_path: Path, body: str, head: str = REPLAY) -> Path:
    """A job spec file: the top-level keys of ``head``, then ``body`` (which may open tables)."""
    path = tmp_path / "job.toml"
    path.write_text(head + body, "utf-8")
    return path


def spec_error(path: Path) -> str:
    """The message of the error that reading ``path`` raises; it must be one line naming the file."""
    with pytest.raises(MindcapError) as info:
        load_spec(path)
    msg = str(info.value)
    assert len(msg.splitlines()) == 1, msg
    assert str(path) in msg, msg
    return msg


def run(args: list[str]):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def one_line_error(res, needle: str) -> None:
    """A user error: exit 2, a single stderr line naming the problem, no traceback."""
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert res.stderr.startswith("error: ") and needle in res.stderr, res.stderr


# -- 1. integer settings refuse bools and floats, boolean settings refuse ints --------------------------------


def test_well_typed_spec_reads_its_values(tmp_path):
    # the control: every integer setting typed as an integer is read as written
    path = spec_file(
        tmp_path,
        "k = 3\ncaps = [64, 128]\nseed = 5\nshard_size = 7\nitems = [4, 9]\n"
        "[sampling]\ntop_k = 40\n[forcing]\nenabled = true\nmax_tokens = 9\nunanswered = false\n",
        head=BASE + 'design = "independent"\n',
    )
    spec = load_spec(path)
    assert (spec.k, spec.caps, spec.seed, spec.shard_size, spec.items) == (3, (64, 128), 5, 7, (4, 9))
    assert (spec.sampling.top_k, spec.forcing.enabled, spec.forcing.max_tokens, spec.forcing.unanswered) == (
        40,
        True,
        9,
        False,
    )
    sample = load_spec(spec_file(tmp_path, "items = {sample = 3, seed = 2}\n")).items
    assert sample == tuple(sorted(random.Random(2).sample(range(250), 3)))


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ("k = true\n", "k"),
        ("k = 8.0\n", "k"),
        ("caps = [true]\n", "caps[0]"),
        ("caps = true\n", "caps"),
        ("caps = 64.5\n", "caps"),
        ("seed = true\n", "seed"),
        ("seed = 1.0\n", "seed"),
        ("shard_size = true\n", "shard_size"),
        ("shard_size = 2.5\n", "shard_size"),
        ("items = [0, true]\n", "items[1]"),
        ("items = [0, 1.0]\n", "items[1]"),
        ("items = {sample = true}\n", "items.sample"),
        ("items = {sample = 5, seed = false}\n", "items.seed"),
        ("items = {sample = 5, seed = 1.5}\n", "items.seed"),
        ("[sampling]\ntop_k = true\n", "sampling.top_k"),
        ("[forcing]\nmax_tokens = true\n", "forcing.max_tokens"),
        ("[forcing]\nmax_tokens = 16.0\n", "forcing.max_tokens"),
        ("[forcing]\nenabled = 1\n", "forcing.enabled"),
        ("[forcing]\nunanswered = 0\n", "forcing.unanswered"),
    ],
)
def test_integer_settings_refuse_bools_and_floats(tmp_path, body, key):
    msg = spec_error(spec_file(tmp_path, body))
    want = "bool" if key.startswith(("forcing.enabled", "forcing.unanswered")) else "int"
    assert f"{key}: must be of type {want}" in msg


def test_announced_budgets_refuse_bools(tmp_path):
    head = BASE + 'design = "announcement"\n'
    msg = spec_error(spec_file(tmp_path, "[announce]\nbudgets = [128, true]\n", head=head))
    assert "announce.budgets[1]: must be of type int, got true" in msg


# -- 3. every other key: wrong types, non-finite premiums, non-UTF-8 -------------------------------------------


@pytest.mark.parametrize(
    ("head", "body", "needle"),
    [
        (REPLAY, "engine = 5\n", "engine: must be a table, got 5"),
        (REPLAY, 'sampling = "hot"\n', "sampling: must be a table"),
        (REPLAY, "forcing = [1]\n", "forcing: must be a table"),
        (REPLAY, "[sampling]\ntemperature = nan\n", "sampling.temperature"),
        (REPLAY, "[sampling]\ntop_p = inf\n", "sampling.top_p"),
        (REPLAY, "[forcing]\ntext = 5\n", "forcing.text: must be of type string"),
        (REPLAY, "scaled_arms = 5\n", "scaled_arms: must be of type string"),
        (REPLAY, 'scaled_arms = {a = "native"}\n', "scaled_arms"),
        (REPLAY, "name = 5\n", "name: must be of type string"),
        (REPLAY, 'model_name = ["m"]\n', "model_name: must be of type string"),
        (REPLAY, "tokenizer = 7\n", "tokenizer: must be of type string"),
        (REPLAY, "prompt_version = 1\n", "prompt_version: must be of type string"),
        (REPLAY, "items = 5\n", "items: must be 'all', a list of item indices or {sample = N, seed = S}, got 5"),
        (REPLAY, "[announce]\nstyle = 3\n", "announce.style: must be of type string"),
        ('model = 5\narms = ["native"]\nlangs = ["de"]\ndesign = "replay"\n', "", "model: must be of type string"),
        ('model = "m"\narms = ["native"]\nlangs = 5\ndesign = "replay"\n', "", "langs: must be of type string"),
        ('model = "m"\narms = ["native"]\nlangs = [["de"]]\ndesign = "replay"\n', "", "langs[0]: must be of type"),
        ('model = "m"\narms = {native = 1}\nlangs = ["de"]\ndesign = "replay"\n', "", "arms: must be of type string"),
        ('model = "m"\narms = ["native"]\nlangs = ["de"]\ndesign = ["replay"]\n', "", "design: must be of type string"),
        ('model = "m"\narms = ["native"]\nlangs = ["de"]\ndesign = "independent"\n', "", "needs caps"),
        (IND, "premiums = [1.5]\n", 'premiums: must be a table (lang = r) or "flores", got [1.5]'),
        (IND, "[premiums]\nde = nan\n", "premiums.de: must be of type float (finite), got nan"),
        (IND, "[premiums]\nde = inf\n", "premiums.de: must be of type float (finite), got inf"),
        (IND, "[premiums]\nde = -inf\n", "premiums.de: must be of type float (finite), got -inf"),
        (IND, "[premiums]\nde = -1.5\n", "premiums.de: must be > 0, got -1.5"),
        (IND, "[premiums]\nde = 0\n", "premiums.de: must be > 0, got 0.0"),
        (IND, "[premiums]\nde = true\n", "premiums.de: must be of type float (finite), got true"),
    ],
)
def test_wrong_types_name_the_key_and_the_file(tmp_path, head, body, needle):
    assert needle in spec_error(spec_file(tmp_path, body, head=head))


def test_non_utf8_spec_is_one_line(tmp_path):
    path = tmp_path / "job.toml"
    path.write_bytes(b'name = "caf\xe9"\n' + BASE.encode() + b'design = "replay"\n')  # Latin-1, not UTF-8
    assert "is not UTF-8" in spec_error(path)
    one_line_error(run(["generate", str(path), "--out-dir", str(tmp_path / "led"), "--dry-run"]), "is not UTF-8")


def test_cli_names_the_bad_key_and_file(tmp_path):
    path = spec_file(tmp_path, "engine = 5\n")
    result = run(["generate", str(path), "--out-dir", str(tmp_path / "led"), "--dry-run"])
    one_line_error(result, f"{path}: engine: must be a table")


# -- 2. absurd sizes: refused with a documented limit, counted without listing records --------------------------


def _limit_memory(gib: float):
    def apply() -> None:  # a dry run needs ~0.5 GiB of address space (measured); give it room, not unbounded
        limit = int(gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def _cli(args: list[str], timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    """The real entry point in a fresh interpreter, under a 1.5 GiB address-space limit."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mindcap_tok", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        cwd=REPO,
        preexec_fn=_limit_memory(1.5),
        timeout=timeout,
    )
    return proc, time.perf_counter() - start


def test_dry_run_with_a_huge_k_is_refused_at_once(tmp_path):
    path = spec_file(tmp_path, f"k = {10**12}\n")
    proc, seconds = _cli(["generate", str(path), "--out-dir", str(tmp_path / "led"), "--dry-run"])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "Traceback" not in proc.stderr
    assert f"{path}: k: must be an integer in 1..{MAX_K}, got {10**12}" in proc.stderr
    assert seconds < 30


def test_huge_caps_are_refused(tmp_path):
    msg = spec_error(spec_file(tmp_path, f"caps = [{10**12}]\n"))
    assert f"caps[0]: must be an integer in 1..{MAX_CAP}, got {10**12}" in msg
    head = BASE + 'design = "independent"\ncaps = [4096]\n'
    assert "above the largest cap" in spec_error(spec_file(tmp_path, "[premiums]\nde = 1e300\n", head=head))


def test_dry_run_at_the_largest_k_counts_without_listing_records(tmp_path):
    # the paper's independent job (270,000 records at k = 8, test_generate) at k = MAX_K: 337.5 million records,
    # which a dry run must count, not list, within the memory limit and in seconds
    text = (REPO / "examples" / "jobs" / "independent.toml").read_text("utf-8")
    assert "\nk = 8\n" in text
    path = tmp_path / "big.toml"
    path.write_text(text.replace("\nk = 8\n", f"\nk = {MAX_K}\n"), "utf-8")
    per_sample = plan_job(load_spec(REPO / "examples" / "jobs" / "independent.toml")).worst_case_tokens // 8
    led = tmp_path / "led"
    led.mkdir()
    proc, seconds = _cli(["generate", str(path), "--out-dir", str(led), "--dry-run"])
    assert proc.returncode == 0, proc.stderr
    assert (
        f"33750 requests, {33750 * MAX_K} records, 135 shards (0 already done), "
        f"worst case {per_sample * MAX_K} output tokens"
    ) in proc.stdout
    assert seconds < 30


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"shard_size": 3, "items": [0, 1, 2, 3, 4, 5, 6], "forcing": {"enabled": True, "text": "\nÂ", "max_tokens": 5}},
        {"design": "announcement", "caps": [512], "announce": {"budgets": [64, 256]}, "shard_size": 4, "k": 3},
        {"design": "independent", "caps": [64, 100], "premiums": {"de": 1.5, "th": 1.01}, "scaled_arms": ["native"]},
    ],
)
def test_counts_match_the_listed_plan(extra):
    # job_counts works the numbers out per population; plan_job lists every request: they must agree
    data = {
        "model": "org/m",
        "arms": ["native", "pivot"],
        "langs": ["de", "th"],
        "design": "replay",
        "items": list(range(10)),
        "k": 2,
        "shard_size": 4,
        **extra,
    }
    spec = parse_spec(data)
    assert job_counts(spec) == plan_job(spec).summary()


def test_shards_done_needs_every_sample_below_k(tmp_path, qwen):
    # two shards of two items; the ledger holds item 0 and 1 fully, item 2 sample 0, item 3 samples 1 and 5:
    # at k = 2 only the first shard is done (sample 5 is beyond k and does not stand in for sample 0)
    held = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (3, 1), (3, 5)]
    Ledger(tmp_path / "led").append([make_record(qwen, "#### 1", item=i, sample=s) for i, s in held], qwen)
    data = {
        "model": "Qwen/Qwen3-8B",
        "model_name": "qwen3-8b",
        "arms": ["native"],
        "langs": ["th"],
        "design": "replay",
        "items": [0, 1, 2, 3],
        "shard_size": 2,
    }
    assert dry_run(parse_spec({**data, "k": 2}), tmp_path / "led")["shards_done"] == 1
    assert dry_run(parse_spec({**data, "k": 1}), tmp_path / "led")["shards_done"] == 1
    assert dry_run(parse_spec({**data, "k": 3}), tmp_path / "led")["shards_done"] == 0
    assert dry_run(parse_spec({**data, "k": 2, "items": [0, 1, 2]}), tmp_path / "led")["shards_done"] == 1


# -- 4. empty FLORES files and an English text without tokens --------------------------------------------------


def _flores(root: Path, files: dict[str, str]) -> Path:
    folder = root / "flores200" / "devtest"
    folder.mkdir(parents=True)
    for code, text in files.items():
        (folder / f"{code}.devtest").write_text(text, "utf-8")
    return root


def _whitespace_tokenizer() -> ResolvedTokenizer:
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return ResolvedTokenizer(name="ws", tokenizer=tok, source="test")


def test_empty_flores_files_are_named(tmp_path):
    root = _flores(tmp_path, {"eng_Latn": "", "tha_Thai": ""})
    eng = root / "flores200" / "devtest" / "eng_Latn.devtest"
    with pytest.raises(MindcapError, match=f"FLORES file is empty: {re.escape(str(eng))}$"):
        load_parallel(["th"], "devtest", source=str(root / "flores200"))
    with pytest.raises(MindcapError, match=f"FLORES file is empty: {re.escape(str(eng))}$"):
        token_premium(_whitespace_tokenizer(), ["th"], source=str(root / "flores200"), resampling=Resampling(40))


def test_empty_target_file_is_named(tmp_path):
    root = _flores(tmp_path, {"eng_Latn": "a\nb\n", "tha_Thai": ""})
    tha = root / "flores200" / "devtest" / "tha_Thai.devtest"
    with pytest.raises(MindcapError, match=f"FLORES file is empty: {re.escape(str(tha))}$"):
        token_premium(_whitespace_tokenizer(), ["th"], source=str(root / "flores200"), resampling=Resampling(40))


def test_english_without_tokens_is_named(tmp_path):
    # two lines, both blank: the ratio would divide by zero tokens
    root = _flores(tmp_path, {"eng_Latn": " \n\t\n", "tha_Thai": "a b\nc\n"})
    eng = root / "flores200" / "devtest" / "eng_Latn.devtest"
    with pytest.raises(MindcapError, match=f"^{re.escape(str(eng))} has no tokens with ws's tokenizer$"):
        token_premium(_whitespace_tokenizer(), ["th"], source=str(root / "flores200"), resampling=Resampling(40))


@pytest.mark.parametrize(
    ("files", "bad", "needle"),
    [
        ({"eng_Latn": "", "tha_Thai": ""}, "eng_Latn", "FLORES file is empty: "),
        ({"eng_Latn": "a\nb\n", "tha_Thai": ""}, "tha_Thai", "FLORES file is empty: "),
        ({"eng_Latn": "\n\n", "tha_Thai": "ก\nข\n"}, "eng_Latn", ""),  # two empty lines: no tokens at all
    ],
)
def test_premium_cli_on_empty_files_is_one_line(tmp_path, files, bad, needle):
    root = _flores(tmp_path, files)
    path = root / "flores200" / "devtest" / f"{bad}.devtest"
    res = run(["--data-dir", str(root), "premium", "--lang", "th", "--n-boot", "40"])
    one_line_error(res, f"{needle}{path}")
    proc, _ = _cli(["--data-dir", str(root), "premium", "--lang", "th", "--n-boot", "40"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and str(path) in proc.stderr
