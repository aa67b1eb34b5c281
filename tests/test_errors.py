"""The exception hierarchy under MindcapError: kinds, structured fields, and where each kind is raised."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import mindcap_tok
from fake_server import LABEL, ONE_REQUEST, server_backend, server_spec
from ledger_factory import make_cell
from mindcap_tok.cli.main import cli
from mindcap_tok.config import ENV_CONFIG, load_config
from mindcap_tok.errors import (
    BackendError,
    BadInputError,
    DamagedDataError,
    MindcapError,
    MissingExtraError,
    locate,
    with_context,
)
from mindcap_tok.generation.backends import require
from mindcap_tok.generation.generate import run_job
from mindcap_tok.generation.jobs import parse_spec
from mindcap_tok.premium import token_premium
from mindcap_tok.resample import Resampling
from mindcap_tok.spec import SpecError, reading
from mindcap_tok.stats.protocol import load_protocol
from mindcap_tok.store.ledger import MANIFEST, Ledger

SRC = Path(mindcap_tok.__file__).parent  # the package under test
#: the only ``raise ValueError(`` allowed in src: pydantic validators of the spec layer, which must raise
#: ValueError for pydantic to report the value (``spec.validate``/``spec.check`` turn it into a SpecError)
VALUE_ERROR_ALLOWED = {"spec.py": 2}


@pytest.mark.parametrize("kind", [BadInputError, DamagedDataError, BackendError, MissingExtraError, SpecError])
def test_every_kind_is_a_mindcap_error(kind):
    assert issubclass(kind, MindcapError)
    assert issubclass(SpecError, BadInputError)


def test_fields_are_keyword_only_and_the_message_stays_one_line():
    bad = BadInputError("must be positive", key="n_boot")
    assert (str(bad), bad.key, bad.source) == ("must be positive", "n_boot", None)
    damaged = DamagedDataError("shard truncated", path="L/x.parquet", source="L")
    assert (str(damaged), damaged.path) == ("L: shard truncated", "L/x.parquet")
    failed = BackendError("request failed", url="http://h/v1", attempts=3)
    assert (str(failed), failed.url, failed.attempts) == ("request failed", "http://h/v1", 3)
    with pytest.raises(TypeError):
        BadInputError("x", "n_boot")  # the message's words, not fields, are positional
    spec = SpecError("sampling.top_p", "must be in (0, 1], got 5.0")
    assert (spec.key, spec.problem) == ("sampling.top_p", "must be in (0, 1], got 5.0")
    assert str(spec) == "sampling.top_p: must be in (0, 1], got 5.0"


def test_reading_names_the_source_by_field_and_keeps_the_kind():
    with pytest.raises(SpecError) as exc, reading("job.toml"):
        raise SpecError("k", "must be >= 1, got 0")
    assert (exc.value.source, exc.value.key, str(exc.value)) == ("job.toml", "k", "job.toml: k: must be >= 1, got 0")
    with pytest.raises(MissingExtraError) as missing, reading("job.toml"):
        raise MissingExtraError("vllm", "vllm")
    assert missing.value.source is None and not str(missing.value).startswith("job.toml")
    inner = BadInputError("x", source="a.toml")
    assert not locate(inner, "b.toml") and str(inner) == "a.toml: x"  # the first source named stays


def test_bad_spec_value_is_a_spec_error_naming_file_and_key():
    data = {"model": "x", "arms": ["native"], "langs": ["deu_Latn"], "design": "replay", "sampling": {"top_p": 5.0}}
    with pytest.raises(SpecError) as exc:
        parse_spec(data, source="job.toml")
    assert isinstance(exc.value, BadInputError)
    assert (exc.value.key, exc.value.source) == ("sampling.top_p", "job.toml")
    assert str(exc.value) == "job.toml: sampling.top_p: must be in (0, 1], got 5.0"


def test_spec_rules_of_a_reader_are_bad_input_naming_the_file():
    data = {"model": "x", "arms": ["native"], "langs": ["deu_Latn"], "design": "nope"}
    with pytest.raises(BadInputError) as exc:
        parse_spec(data, source="job.toml")
    assert exc.value.source == "job.toml"
    assert (
        str(exc.value) == "job.toml: design: must be one of replay, independent, announcement, determinism, got 'nope'"
    )


def test_protocol_and_config_files_are_bad_input(tmp_path, monkeypatch):
    proto = tmp_path / "p.toml"
    proto.write_text("seed = 1\n", "utf-8")
    with pytest.raises(BadInputError) as exc:
        load_protocol(proto)
    assert (exc.value.source, str(exc.value)) == (proto, f"{proto}: a protocol needs a name")
    monkeypatch.setenv(ENV_CONFIG, str(tmp_path))
    with pytest.raises(BadInputError, match=rf"^{ENV_CONFIG} names .*, which is not a file$"):
        load_config()


def test_missing_extra_from_require():
    with pytest.raises(MissingExtraError) as exc:
        require("mindcap_no_such_module", "vllm", backend="vllm")
    assert (exc.value.package, exc.value.extra) == ("mindcap_no_such_module", "vllm")
    assert str(exc.value) == "the vllm backend needs mindcap_no_such_module: pip install 'mindcap-tok[vllm]'"


def test_damaged_shard_and_manifest_are_damaged_data(tmp_path, qwen):
    root = tmp_path / "L"
    (shard,) = Ledger(root).append(make_cell(qwen, n_items=2, n_samples=1), qwen)
    path = root / shard.path
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    with pytest.raises(DamagedDataError) as exc:
        Ledger(root).read()
    assert exc.value.path == path
    assert f"{len(data) - 5} bytes, the manifest says {len(data)}" in str(exc.value)
    out = CliRunner().invoke(cli, ["ledger", "info", str(root)])  # still one line, exit 2
    assert out.exit_code == 2 and out.output.startswith("error: cannot read ledger shard")
    assert len(out.output.splitlines()) == 1
    (root / MANIFEST).write_text('{"format": "something else"}', "utf-8")
    with pytest.raises(DamagedDataError) as bad:
        Ledger(root).read()
    assert bad.value.path == root / MANIFEST


def test_server_that_always_fails_is_a_backend_error(tmp_path, tiny, fakes, config):
    fake = fakes()
    fake.faults = ["500", "500"]
    spec = parse_spec(server_spec(tiny, fake.url, ONE_REQUEST, max_retries=1))
    with pytest.raises(BackendError) as exc:
        run_job(spec, tmp_path / "led", backend=server_backend(tiny, spec), data_dir=config.data_dir.value)
    assert (exc.value.attempts, exc.value.url) == (2, fake.url)
    assert re.match(rf"{re.escape(LABEL)} failed after 2 attempt\(s\) in [0-9]+\.[0-9] s: ", str(exc.value))


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5])
def test_premium_with_a_bad_level_is_bad_input(qwen, level):
    with pytest.raises(BadInputError) as exc:
        token_premium(qwen, languages=["deu_Latn"], resampling=Resampling(level=level))
    assert not isinstance(exc.value, ValueError)
    assert (exc.value.key, str(exc.value)) == ("level", f"confidence level must be in (0, 1), got {level}")


def test_src_raises_no_value_error_for_user_input():
    found = {}
    for file in SRC.rglob("*.py"):
        n = len(re.findall(r"raise ValueError\(", file.read_text("utf-8")))
        if n:
            found[str(file.relative_to(SRC))] = n
    assert found == VALUE_ERROR_ALLOWED


# -- context added around an error keeps its kind ----------------------------------------------------------------
def test_with_context_keeps_kind_and_fields():
    missing = with_context(MissingExtraError("fasttext", "lid"), "ctx: here")
    assert type(missing) is MissingExtraError and (missing.package, missing.extra) == ("fasttext", "lid")
    assert str(missing) == "ctx: here"
    damaged = with_context(DamagedDataError("truncated", path="L/x", source="L"), "reading L: truncated")
    assert type(damaged) is DamagedDataError and (damaged.path, damaged.source) == ("L/x", None)
    assert str(damaged) == "reading L: truncated"  # the source is in the message once, not twice


def _no_sentencepiece(*args, **kwargs):
    raise MissingExtraError("sentencepiece", "spm")


EXTRA = "sentencepiece is not installed; install the 'spm' extra: pip install 'mindcap-tok[spm]'"


def test_premiums_for_a_tokenizer_keep_a_missing_extra(monkeypatch):
    from mindcap_tok.stats import premiums
    from mindcap_tok.tokenization import load as tokenizer

    monkeypatch.setattr(tokenizer, "load_tokenizer", _no_sentencepiece)  # imported where it is used
    with pytest.raises(MissingExtraError) as exc:
        premiums.resolve_premiums(["gemma-3"], ["gemma-3"], languages=["deu_Latn"])
    assert str(exc.value) == f"cannot compute premiums for 'gemma-3': {EXTRA}"


def test_ledger_tokenizers_keep_a_missing_extra(monkeypatch):
    from mindcap_tok.store import tokenizers

    monkeypatch.setattr(tokenizers, "load_tokenizer", _no_sentencepiece)
    with pytest.raises(MissingExtraError) as exc:
        tokenizers.resolve_tokenizers(["gemma-3"], None)
    assert str(exc.value).startswith(f"cannot load the tokenizer 'gemma-3' that these records name ({EXTRA}); ")


def test_ledger_append_keeps_a_missing_extra(tmp_path, qwen, monkeypatch):
    from mindcap_tok.store import ledger as store

    monkeypatch.setattr(store, "load_tokenizer", _no_sentencepiece)
    with pytest.raises(MissingExtraError) as exc:
        Ledger(tmp_path / "L").append(make_cell(qwen, n_items=1, n_samples=1), None)
    assert str(exc.value) == f"cannot check token ids of tokenizer 'qwen3-8b': {EXTRA}; pass the tokenizer to append()"


HYPOTHESIS = '[[hypotheses]]\nid = "H1"\nkind = "delta"\nlang = "th"\nbudget = 192\n'


def test_protocol_premium_tokenizer_keeps_a_missing_extra(tmp_path, monkeypatch):
    from mindcap_tok.stats.protocol import protocol_inputs
    from mindcap_tok.tokenization import load as tokenizer

    monkeypatch.setattr(tokenizer, "load_tokenizer", _no_sentencepiece)
    proto = tmp_path / "p.toml"
    proto.write_text('name = "p"\nmodel = "gemma-3"\npremiums = "gemma-3"\n' + HYPOTHESIS, "utf-8")
    with pytest.raises(MissingExtraError) as exc:
        protocol_inputs(proto)
    assert str(exc.value) == f"{proto}: cannot load its premiums tokenizer gemma-3: {EXTRA}"


def test_import_keeps_damaged_data_found_after_a_committed_batch(tmp_path, qwen):
    from mindcap_tok.ingest.jsonl import import_jsonl

    src = tmp_path / "gen.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in make_cell(qwen, n_items=2, n_samples=1)), "utf-8")
    root = tmp_path / "L"

    def damage(records, _total):  # the first batch is committed: the ledger's manifest breaks before the second
        (root / MANIFEST).write_text('{"format": "something else"}', "utf-8")

    with pytest.raises(DamagedDataError) as exc:
        import_jsonl(src, root, tokenizer=qwen, batch_records=1, on_progress=damage)
    assert exc.value.path == root / MANIFEST
    assert str(exc.value).endswith(
        f"; 1 records before it were committed to {root} (rerun after fixing the line to continue)"
    )
