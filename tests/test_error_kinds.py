"""Errors are raised as their kind (bad input, damaged data, backend, storage, setup), never as a bare
MindcapError: a source check over the package, and the kind specific problems come out as."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner

import mindcap_tok
from mindcap_tok._io import check_folder_path
from mindcap_tok.adaptation import load_extension
from mindcap_tok.cli.main import cli
from mindcap_tok.data.languages import resolve_language
from mindcap_tok.errors import (
    BackendError,
    BadInputError,
    DamagedDataError,
    MindcapError,
    SetupError,
    StorageError,
    locate,
    with_context,
)
from mindcap_tok.generation.backends.server import parse_response
from mindcap_tok.roundtrip.sequences import parse_chain
from mindcap_tok.stats.protocol import freeze_path, verify_protocol

SRC = Path(mindcap_tok.__file__).parent  # the package under test


def bare_raises(source: str) -> list[int]:
    """Lines of ``source`` that build or raise a bare ``MindcapError`` (``MindcapError(...)`` by name or as
    ``errors.MindcapError``, or ``raise MindcapError`` without a call)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        target = node.func if isinstance(node, ast.Call) else node.exc if isinstance(node, ast.Raise) else None
        name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None
        if name == "MindcapError":
            lines.append(node.lineno)
    return lines


def test_the_check_finds_a_bare_mindcap_error_and_passes_a_kind():
    probe = 'from .errors import BadInputError, MindcapError\n\ndef f(x):\n    if x:\n        raise MindcapError("x")\n'
    assert bare_raises(probe) == [5]
    assert bare_raises("import mindcap_tok.errors as e\nerr = e.MindcapError('y')\n") == [2]
    assert bare_raises("def f():\n    raise MindcapError\n") == [2]
    kind = 'def f():\n    try:\n        g()\n    except MindcapError:\n        raise BadInputError("x")\n'
    assert bare_raises(kind) == []  # catching every kind is fine; raising the umbrella is not


def test_no_bare_mindcap_error_outside_errors_py():
    found = {
        str(file.relative_to(SRC)): lines
        for file in sorted(SRC.rglob("*.py"))
        if file.name != "errors.py" or file.parent != SRC
        if (lines := bare_raises(file.read_text("utf-8")))
    }
    assert found == {}


@pytest.mark.parametrize("kind", [StorageError, SetupError])
def test_new_kinds_are_mindcap_errors_and_keep_their_kind_under_context(kind):
    assert issubclass(kind, MindcapError)
    wrapped = with_context(kind("inner"), "outer: inner")
    assert type(wrapped) is kind and str(wrapped) == "outer: inner"


def test_a_setup_problem_names_no_source():
    problem = SetupError("tiktoken is not installed (pip install tiktoken)")
    assert not locate(problem, "job.toml") and str(problem) == "tiktoken is not installed (pip install tiktoken)"


# -- the user's input ----------------------------------------------------------------------------------------------
def test_an_unknown_language_is_bad_input():
    with pytest.raises(BadInputError, match=r"^unknown language 'xx_Nope': use a FLORES-200 code"):
        resolve_language("xx_Nope")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("en>de>th", "must end in its source language eng_Latn"),
        ("en>de>de>en", "translates a language into itself"),
    ],
)
def test_a_bad_round_trip_sequence_is_bad_input(text, problem):
    with pytest.raises(BadInputError, match=problem):
        parse_chain(text)


def test_a_folder_without_an_extension_manifest_is_bad_input(tmp_path):
    with pytest.raises(BadInputError, match=r"is not a saved extension \(no "):
        load_extension(tmp_path)


# -- stored data that fails its checks -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("manifest", "problem"),
    [("{not json", "is not valid JSON"), ('{"format": "something else"}', "unknown format 'something else'")],
)
def test_a_damaged_extension_manifest_is_damaged_data(tmp_path, manifest, problem):
    (tmp_path / "manifest.json").write_text(manifest, "utf-8")
    with pytest.raises(DamagedDataError, match=problem):
        load_extension(tmp_path)


def _protocol_with_damaged_freeze(tmp_path: Path) -> Path:
    proto = tmp_path / "p.toml"
    proto.write_text('name = "p"\n', "utf-8")
    freeze_path(proto).write_text("{half a record", "utf-8")
    return proto


def test_a_damaged_freeze_record_is_damaged_data_and_one_cli_line(tmp_path):
    proto = _protocol_with_damaged_freeze(tmp_path)
    with pytest.raises(DamagedDataError, match=r"^cannot read freeze record .*p\.toml\.freeze\.json: "):
        verify_protocol(proto)
    (tmp_path / "L").mkdir()
    out = CliRunner().invoke(cli, ["protocol", "test", str(proto), "--ledger", str(tmp_path / "L")])
    assert out.exit_code == 2  # every kind exits 2, as every MindcapError did
    assert out.output.startswith("error: cannot read freeze record") and len(out.output.splitlines()) == 1


# -- a server's reply, the disk ------------------------------------------------------------------------------------
def test_a_malformed_server_reply_is_a_backend_error():
    reply = {
        "choices": [
            {"index": 0, "text": "a", "finish_reason": "stop"},
            {"index": 0, "text": "b", "finish_reason": "stop"},
        ]
    }
    with pytest.raises(BackendError, match=r"^choices 0 and 1 both have index 0$"):
        parse_response(reply, 2, chat=False, max_tokens=4, vocab_size=10)


def test_a_folder_that_cannot_be_created_is_a_storage_error():
    # /proc takes no new folders, whoever runs the test (root passes every permission check)
    with pytest.raises(
        StorageError, match=r"^cannot create output folder /proc/mindcap-tok-x/y: /proc is not writable"
    ):
        check_folder_path("/proc/mindcap-tok-x/y")
