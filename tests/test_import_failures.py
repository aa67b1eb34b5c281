"""Imports fail in one line, whatever the input: records of the wrong shape name their file and line, a full disk
says how much was committed (nothing of a one-commit log import, and no shard left behind), and model names are
stored as the README states (a registry model's Hugging Face id by registry name, anything else as given)."""

from __future__ import annotations

import builtins
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import BadInputError, MindcapError
from mindcap_tok.ingest.inspect_logs import sample_item
from mindcap_tok.ingest.jsonl import import_jsonl
from mindcap_tok.store import commit
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.registry import registry_model_name

TIME = "2026-01-01T00-00-00.000000"
ARGS = {"gen_args_0": {"arg_0": "โจทย์", "arg_1": {"max_gen_toks": 16}}}
LINE = {"doc_id": 0, "doc": {"question": "q"}, "target": "1", "arguments": ARGS, "resps": [["ans 1"]]}


def _run(folder: Path, lines: list[dict], results: object = None, task: str = "mgsm_native_cot_th") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    (folder / f"samples_{task}_{TIME}.jsonl").write_text(text, "utf-8")
    if results is not None:
        (folder / f"results_{TIME}.json").write_text(json.dumps(results), "utf-8")
    return folder


def _results(model: str) -> dict:
    return {"config": {"model": "hf", "model_args": f"pretrained={model},dtype=float32"}, "configs": {}}


def _invoke(*args: object):
    return CliRunner().invoke(cli, [*map(str, args)])


def _lmeval(logs: Path, ledger: Path):
    return _invoke("ledger", "import", logs, "--from", "lm-eval", "--tokenizer", "qwen3-8b", "--out-dir", ledger)


def _one_line(res, pattern: str) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and re.search(pattern, lines[0]), res.output
    assert "Error:" not in lines[0] and "rerun with --debug" not in lines[0], lines[0]  # no wrapped Python error
    return lines[0]


# -- records of the wrong shape --------------------------------------------------------------------------------

SAMPLES = rf"samples_mgsm_native_cot_th_{TIME}\.jsonl:1"
RESULTS = rf"results_{TIME}\.json"


@pytest.mark.parametrize(
    ("line", "results", "message"),
    [
        ({**LINE, "arguments": [["p", {}]]}, None, rf"{SAMPLES}: arguments lacks gen_args_0\.arg_0"),
        ({**LINE, "arguments": {"gen_args_0": ["p"]}}, None, rf"{SAMPLES}: arguments lacks gen_args_0\.arg_0"),
        ({**LINE, "arguments": {"gen_args_0": {"arg_0": "p", "arg_1": []}}}, None, rf"{SAMPLES}: gen_args_0\.arg_1"),
        ({**LINE, "resps": [[5]]}, None, rf"{SAMPLES}: resps holds a response that is not text"),
        ({**LINE, "resps": [[["ans"]]]}, None, rf"{SAMPLES}: resps holds a response that is not text"),
        ({**LINE, "target": "²"}, None, rf"{SAMPLES}: target '²' is not an integer"),
        ({**LINE, "doc_id": 2**63}, None, rf"{SAMPLES} \(response 0\): .*item = 9223372036854775808 does not fit"),
        (
            {**LINE, "arguments": {"gen_args_0": {"arg_0": "p", "arg_1": {"max_gen_toks": "8"}}}},
            None,
            rf"{SAMPLES}: max_gen_toks = '8' is not a positive integer",
        ),
        (LINE, {"config": [], "configs": {}}, rf"{RESULTS}: config = \[\] is not an object"),
        (LINE, {"config": {"model_args": ["x"]}, "configs": {}}, rf"{RESULTS}: config\.model_args = \['x'\] is not"),
        (LINE, {"config": {"model_args": {"pretrained": 7}}, "configs": {}}, rf"{RESULTS}: config\.model_args\.pre"),
        (LINE, {"configs": {"mgsm_native_cot_th": ["x"]}}, rf"{RESULTS}: configs\.mgsm_native_cot_th = \['x'\]"),
        (LINE, {"configs": {"mgsm_native_cot_th": {"generation_kwargs": "x"}}}, rf"{RESULTS}: configs\..*kwargs ="),
        (LINE, {"configs": {}, "torch_seed": "1234"}, rf"{RESULTS}: torch_seed = '1234' is not an integer"),
        (LINE, {"configs": {}, "lm_eval_version": 4}, rf"{RESULTS}: lm_eval_version = 4 is not a string"),
        (LINE, {"configs": {}, "model_name": ["m"]}, rf"{RESULTS}: model_name = \['m'\] is not a string"),
    ],
)
def test_lm_eval_fields_of_the_wrong_shape_are_one_line(tmp_path, line, results, message):
    _one_line(_lmeval(_run(tmp_path / "run", [line], results), tmp_path / "L"), message)
    assert not (tmp_path / "L").exists()


def test_the_well_shaped_log_imports(tmp_path):
    """The control of the cases above: the same line and a results file with every field read, well shaped."""
    results = {**_results("Qwen/Qwen3-8B"), "torch_seed": 1234, "lm_eval_version": "0.4.13", "model_name": "m"}
    results["configs"] = {"mgsm_native_cot_th": {"generation_kwargs": {"max_gen_toks": 9}}}
    line = {**LINE, "arguments": {"gen_args_0": {"arg_0": "p"}}}
    res = _lmeval(_run(tmp_path / "run", [line], results), tmp_path / "L")
    assert res.exit_code == 0, res.output
    rec = Ledger(tmp_path / "L").read(columns=["seed", "cap", "generator_version", "model"]).to_pylist()
    assert rec == [{"seed": 1234, "cap": 9, "generator_version": "0.4.13", "model": "qwen3-8b"}]


@pytest.mark.parametrize("given", ["²", "١٢", "12a", " 12", "1" * 19, 1.0, None, ["1"]])
def test_inspect_sample_ids_that_are_not_integers_are_one_line(given):
    sample = SimpleNamespace(metadata={}, id=given)
    with pytest.raises(BadInputError, match=r"^log: sample x: sample id .* is not an integer; set 'item'"):
        sample_item(sample, "log: sample x")


@pytest.mark.parametrize(("given", "item"), [("12", 12), (12, 12), ("0", 0), ("9" * 18, 10**18 - 1)])
def test_inspect_sample_ids_in_ascii_digits_are_items(given, item):
    assert sample_item(SimpleNamespace(metadata={}, id=given), "log") == item
    assert sample_item(SimpleNamespace(metadata={"item": 3}, id=given), "log") == 3


# -- names -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "registry"),
    [
        ("Qwen/Qwen3-8B", "qwen3-8b"),
        ("qwen/qwen3-8b", "qwen3-8b"),  # the hub reads ids in any case
        ("qwen3", "qwen3-8b"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("evil-org/qwen3-8b", None),
        ("evil-org/Qwen3-8B", None),
        ("Qwen/Qwen3-8B-Base", None),
        ("/models/Qwen/Qwen3-8B", None),
    ],
)
def test_registry_names_come_from_registry_names_aliases_and_the_true_hub_id(name, registry):
    assert registry_model_name(name) == registry


def _score_models(ledger: Path, model: str) -> set[str]:
    res = _invoke("score", "--ledger", ledger, "--budgets", "64", "--format", "json", "--model", model)
    if res.exit_code != 0:
        assert f"match --model {model} (the ledger holds" in res.output, res.output
        return set()
    return {row["model"] for row in json.loads(res.stdout)}


def test_lm_eval_names_are_stored_by_registry_name_and_never_merged(tmp_path):
    """A run of Qwen/Qwen3-8B is stored as qwen3-8b; one of evil-org/qwen3-8b (the same tokenizer, another model)
    beside it under its own name; `score --model` finds each by its names and never the other."""
    lines = [{**LINE, "doc_id": d, "target": str(d + 1)} for d in range(2)]
    assert _lmeval(_run(tmp_path / "qwen", lines, _results("Qwen/Qwen3-8B")), tmp_path / "L").exit_code == 0
    assert _lmeval(_run(tmp_path / "evil", lines, _results("evil-org/qwen3-8b")), tmp_path / "L").exit_code == 0
    led = Ledger(tmp_path / "L")
    assert sorted(led.to_pandas()["model"].unique()) == ["evil-org/qwen3-8b", "qwen3-8b"]
    assert len(led.read(model="qwen3")) == 2 and len(led.read(model="evil-org/qwen3-8b")) == 2
    for model in ("qwen3-8b", "Qwen3-8B", "Qwen/Qwen3-8B", "qwen/qwen3-8b"):
        assert set(led.read(model=model).column("model").to_pylist()) == {"qwen3-8b"}, model
    for model in ("qwen3", "Qwen/Qwen3-8B"):
        assert _score_models(tmp_path / "L", model) == {"qwen3-8b"}, model
    assert _score_models(tmp_path / "L", "evil-org/qwen3-8b") == {"evil-org/qwen3-8b"}
    assert _score_models(tmp_path / "L", "evil-org/Qwen3-8B") == set()  # a name as given is matched as given


def test_jsonl_stores_a_hub_id_by_registry_name_with_the_local_tokenizer(tmp_path, qwen):
    """Without --tokenizer, the tokenizer of `Qwen/Qwen3-8B` records is the local qwen3-8b one (no hub)."""
    rec = {**make_record(qwen, "9 + 9 = 18\n#### 18", model="Qwen/Qwen3-8B")}
    del rec["tokenizer"]
    (tmp_path / "gen.jsonl").write_text(json.dumps(rec) + "\n")
    assert import_jsonl(tmp_path / "gen.jsonl", tmp_path / "L").added == 1
    assert Ledger(tmp_path / "L").read(columns=["model", "tokenizer"]).to_pylist() == [
        {"model": "qwen3-8b", "tokenizer": "qwen3-8b"}
    ]


# -- a full disk -----------------------------------------------------------------------------------------------


@pytest.fixture
def full_disk(monkeypatch):
    """Once ``after`` is set, shard files written by the store go to /dev/full (where the kernel fails the write
    with ENOSPC) after that many more are written normally."""
    state: dict[str, int | None] = {"after": None}  # None: the disk is not full yet
    real_open = builtins.open

    def open_(path, mode="r", *args, **kwargs):
        if "w" in mode and str(path).endswith(".pending") and state["after"] is not None:
            if state["after"] == 0:
                return real_open("/dev/full", mode, *args, **kwargs)
            state["after"] -= 1
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(commit, "open", open_, raising=False)
    return state


def _pending(root: Path) -> list[Path]:
    return list(root.glob("**/.part-*.pending"))


def test_a_full_disk_during_a_log_import_commits_nothing(tmp_path, qwen, full_disk):
    """Two cells (two shards): the second shard's write fails; the first is removed, nothing is committed, and an
    existing ledger is left as it was."""
    led = Ledger(tmp_path / "L")
    led.append([make_record(qwen, "#### 1", lang="deu_Latn")], qwen)
    before = led.to_pandas()
    _run(tmp_path / "run" / "th", [LINE])
    _run(tmp_path / "run" / "de", [LINE], task="mgsm_native_cot_de")
    full_disk["after"] = 1
    line = _one_line(_lmeval(tmp_path / "run", tmp_path / "L"), r"No space left on device")
    assert line == (
        f"error: import of {tmp_path / 'run'} stopped (No space left on device): 0 records committed to "
        f"{tmp_path / 'L'} (the import is one commit); rerun once the problem is fixed"
    )
    assert full_disk["after"] == 0  # the first shard was written, the second failed
    assert not _pending(tmp_path / "L") and led.verify().ok
    assert led.to_pandas().equals(before)


def test_a_full_disk_at_the_commit_removes_the_written_shards(tmp_path, monkeypatch):
    """The manifest's write fails (to /dev/full): the shards written for it go, and no ledger is made."""

    def manifest_to_full_disk(path, text):
        Path("/dev/full").write_text(text)

    monkeypatch.setattr(commit, "atomic_write_text", manifest_to_full_disk)
    _one_line(_lmeval(_run(tmp_path / "run", [LINE]), tmp_path / "L"), r"stopped \(No space left on device\): 0 rec")
    assert not _pending(tmp_path / "L") and not Ledger(tmp_path / "L").exists()


def test_a_full_disk_during_a_jsonl_import_says_what_was_committed(tmp_path, qwen, full_disk):
    """Batches of two: the second batch's write fails; the first stays committed, and the rerun completes."""
    recs = [make_record(qwen, f"#### {i}", item=i, gold=i) for i in range(5)]
    (tmp_path / "gen.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    full_disk["after"] = 1
    with pytest.raises(MindcapError) as info:
        import_jsonl(tmp_path / "gen.jsonl", tmp_path / "L", tokenizer=qwen, batch_records=2)
    assert str(info.value) == (
        f"import of {tmp_path / 'gen.jsonl'} stopped at line 3 (No space left on device): 2 records committed to "
        f"{tmp_path / 'L'} in 1 new shard; rerun to resume"
    )
    led = Ledger(tmp_path / "L")
    assert len(led) == 2 and not _pending(tmp_path / "L") and led.verify().ok
    full_disk["after"] = None
    again = import_jsonl(tmp_path / "gen.jsonl", tmp_path / "L", tokenizer=qwen, batch_records=2)
    assert (again.added, again.skipped, len(led)) == (3, 2, 5)
