"""stdout holds only the product, in every command: each command of ``mindcap-tok`` (every one click's command tree
holds, so a command added later fails here until it has a case) runs once on a small real input (a demo ledger,
the Qwen3 tokenizer, FLORES and MGSM from the shared data, the tiny random Qwen3 on the transformers backend),
with stdout and stderr read apart. A product on stdout must parse whole (JSON, CSV) or be the one verdict line;
a command that writes its product to a file or folder prints nothing on stdout; status lines (``wrote …``,
``imported …``) are on stderr."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

import old_ledgers
from cli_args import price_tiny_args
from cli_tree import leaf_commands
from ledger_factory import make_cell, make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.demo.ledger import build_demo
from mindcap_tok.store.ledger import Ledger
from price_fixture import english_trace, save_tiny, thai_trace
from roundtrip_factory import write_run

#: what a product on stdout is: parsed whole, so a status line mixed in fails the parse
JSON, CSV, NOTHING = "json", "csv", "nothing"


@dataclass(frozen=True)
class Case:
    """One run of a command: its arguments; what stdout holds (:data:`JSON`, :data:`CSV`, :data:`NOTHING`, or a
    regular expression its whole text matches); a regular expression some stderr line must match (``None``: the
    command has no status to give); a file the command writes that must parse as ``written[1]``."""

    args: list
    stdout: str
    status: str | None = None
    written: tuple[Path, str] | None = None


class Inputs:
    """The inputs of every case, each built once on first use: ``get`` is pytest's ``request.getfixturevalue``."""

    def __init__(self, root: Path, get: Callable[[str], object]) -> None:
        self.root, self.get, self._made = root, get, {}

    def once(self, name: str, make: Callable[[Path], object]):
        if name not in self._made:
            self._made[name] = make(self.root / name)
        return self._made[name]

    @property
    def demo(self) -> Path:
        """A demo ledger (``ledger/`` and ``independent/``: qwen3-8b, de/th/sw, 6 MGSM items, 2 samples)."""
        config, qwen = self.get("config"), self.get("qwen")
        data = config.data_dir.value
        return self.once("demo", lambda p: build_demo(p, 7, n_items=6, k=2, tokenizer=qwen, data_dir=data).out_dir)

    @property
    def tiny(self) -> Path:
        """The tiny random Qwen3 (model and tokenizer folder) for the transformers backend."""
        pytest.importorskip("torch", reason="the transformers backend needs the torch extra")
        from tiny_model import build_tiny_model

        return self.once("tiny", lambda p: build_tiny_model(p / "tiny-qwen3"))

    @property
    def tiny_fold(self) -> Path:
        """Fold 0 of a Thai extension of the tiny model's tokenizer, learned on FLORES dev (for adapt and bpb)."""
        from adapt_fixture import tiny_extension

        flores = self.get("flores_dir")
        return self.once("tiny_fold", lambda p: tiny_extension(self.tiny, p, flores))

    @property
    def native(self) -> Path:
        """A ledger of two short native Thai traces (what `render` translates)."""
        qwen = self.get("qwen")

        def make(p: Path) -> Path:
            Ledger(p).append(make_cell(qwen, 2, 1), qwen)
            return p

        return self.once("native", make)

    @property
    def byte_level(self) -> Path:
        """A ledger of the 260-token byte-level tokenizer of ``price_fixture`` (model ``tiny``, Thai, both arms)
        and that tokenizer's folder, for ``price`` and ``extend`` (a small vocabulary learns merges fast)."""

        def make(p: Path) -> Path:
            base = save_tiny(p / "base")
            texts = {"native": thai_trace, "translate-act": english_trace}
            recs = [
                make_record(
                    base, text(10 + 2 * item, item), model="tiny", arm=arm, item=item, sample=s, gold=item, cap=63
                )
                for arm, text in texts.items()
                for item in range(4)
                for s in range(2)
            ]
            Ledger(p / "ledger").append(recs, base)
            return p

        return self.once("byte_level", make)

    @property
    def run_dir(self) -> Path:
        """A finished round-trip run folder (en>de>en of one text, judged)."""
        qwen = self.get("qwen")
        texts = {"a": "Janet has 16 eggs and bakes muffins with four of them."}
        judged = {("qwen3-8b", "qwen3-8b", "a"): ("7-good", 1, 0, 0)}
        return self.once("run", lambda p: write_run(p, qwen, texts, judged))

    @property
    def protocol(self) -> Path:
        """A frozen protocol of one Thai Δ_L hypothesis (for the byte-level ledger)."""

        def make(p: Path) -> Path:
            p.mkdir()
            proto = p / "p.toml"
            proto.write_text(PROTOCOL, "utf-8")
            assert invoke(["protocol", "freeze", proto, "--no-tag"]).exit_code == 0
            return proto

        return self.once("protocol", make)


PROTOCOL = (
    'name = "streams"\nn_boot = 50\nseed = 1\n[premiums]\nth = 2\n'
    '[[hypotheses]]\nid = "H1"\nkind = "delta"\nlang = "th"\nbudget = 16\nmargin = 5\n'
)
#: the sweep statistics' options on the demo's Thai cells, at two budgets and few resamples
STATS = ["--lang", "th", "--premiums", "th=2.55", "--budgets", "128,256", "--n-boot", "50"]
#: the demo ledger's premiums and two budgets, for `view` (which builds a report with its own defaults)
VIEW = ["--premiums", "de=1.56", "--premiums", "th=2.55", "--premiums", "sw=1.94", "--budgets", "128,256"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def _jsonl(inputs: Inputs, tmp: Path) -> Path:
    rows = make_cell(inputs.get("qwen"), 2, 1)
    return _write(tmp / "gen.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _generate_job(inputs: Inputs, tmp: Path) -> Path:
    job = (
        f'name = "streams"\nmodel = "{inputs.tiny}"\nmodel_name = "tiny-qwen3"\narms = ["native"]\nlangs = ["de"]\n'
        'items = [0]\nk = 1\ndesign = "replay"\ncaps = [4]\n'
    )
    return _write(tmp / "job.toml", job)


def _generated(inputs: Inputs, tmp: Path) -> Path:
    """A ledger `generate` wrote (what `ledger merge` joins)."""
    args = ["generate", _generate_job(inputs, tmp), "--out-dir", tmp / "gen", "--backend", "transformers"]
    assert invoke(args).exit_code == 0
    return tmp / "gen"


def _roundtrip_job(inputs: Inputs, tmp: Path) -> Path:
    texts = _write(tmp / "texts.jsonl", json.dumps({"id": "a", "text": "Janet has 16 eggs."}) + "\n")
    job = (
        f'model = "{inputs.tiny}"\nmodel_name = "tiny-qwen3"\nmax_tokens = 4\nsequences = ["en>de>en"]\nseed = 3\n'
        f'texts = "{texts}"\n[judge]\nmax_tokens = 4\nretries = 0\n'
    )
    return _write(tmp / "rt.toml", job)


#: command path -> its case, built from the inputs and a fresh folder for its outputs
CASES: dict[str, Callable[[Inputs, Path], Case]] = {
    "config": lambda i, t: Case(["config", "--format", "json"], JSON),
    "languages": lambda i, t: Case(["languages", "--format", "csv"], CSV),
    "premium": lambda i, t: Case(
        ["premium", "--lang", "th", "--n-boot", "50", "--format", "json", "--out", t / "p.json"],
        NOTHING,
        rf"^wrote {t / 'p.json'}$",
        (t / "p.json", JSON),
    ),
    "check": lambda i, t: Case(
        [
            "check",
            _jsonl(i, t),
            "--tokenizer",
            "qwen3-8b",
            "--premiums",
            "th=2",
            "--format",
            "json",
            "--ledger-out",
            t / "kept",
        ],
        JSON,
        rf"^kept the imported run as the ledger {t / 'kept'}$",
    ),
    "extend": lambda i, t: Case(
        [
            "extend",
            "--model",
            i.byte_level / "base",
            "--lang",
            "th",
            "--corpus",
            _write(t / "corpus.txt", "กากากา ขา\n" * 8),
            "--size",
            "1",
            "--n-boot",
            "40",
            "--out-dir",
            t / "ext",
            "--format",
            "json",
        ],
        JSON,
        rf"^wrote {t / 'ext'} in \d+ s$",
    ),
    "adapt": lambda i, t: Case(
        ["adapt", "--extension", i.tiny_fold, "--model", i.tiny, "--out-dir", t / "adapted", "--format", "json"],
        JSON,
        rf"^wrote {t / 'adapted'} in [0-9.]+ s$",
    ),
    "bpb": lambda i, t: Case(
        ["bpb", "--extension", i.tiny_fold, "--model", i.tiny, "--limit", "2", "--n-boot", "40", "--format", "csv"],
        CSV,
    ),
    "ledger import": lambda i, t: Case(
        ["ledger", "import", _jsonl(i, t), "--out-dir", t / "L"], NOTHING, r"^imported 2 of 2 records into "
    ),
    "ledger info": lambda i, t: Case(["ledger", "info", i.demo / "ledger", "--format", "json"], JSON),
    "ledger merge": lambda i, t: Case(
        ["ledger", "merge", _generated(i, t), "--out-dir", t / "M"], NOTHING, r"^merged 1 of 1 records from 1 ledgers "
    ),
    "ledger migrate": lambda i, t: Case(
        ["ledger", "migrate", old_ledgers.FIXTURES[3], "--out-dir", t / "M"], NOTHING, r"^migrated 6 records in "
    ),
    "ledger verify": lambda i, t: Case(
        ["ledger", "verify", i.demo / "ledger"], r"ok: \d+ shards, \d+ records, all hashes match\n"
    ),
    "score": lambda i, t: Case(
        [
            "score",
            "--ledger",
            i.demo / "ledger",
            "--lang",
            "th",
            "--budgets",
            "64,128",
            "--format",
            "csv",
            "--out",
            t / "s.csv",
        ],
        NOTHING,
        rf"^wrote {t / 's.csv'}$",
        (t / "s.csv", CSV),
    ),
    "view": lambda i, t: Case(
        ["view", i.demo / "ledger", *VIEW, "--out-dir", t / "v", "--no-open"], rf"{t / 'v' / 'report.html'}\n"
    ),
    "sweep": lambda i, t: Case(["sweep", "--ledger", i.demo / "ledger", *STATS, "--format", "json"], JSON),
    "report": lambda i, t: Case(
        ["report", "--ledger", i.demo / "ledger", *STATS, "--out-dir", t / "rep"], NOTHING, rf"^wrote {t / 'rep'}: "
    ),
    "cost-grid": lambda i, t: Case(
        [
            "cost-grid",
            "--ledger",
            i.demo / "ledger",
            "--prices",
            _write(t / "prices.csv", "model,input,output\nqwen3-8b,0.2,0.8\n"),
            "--budgets",
            "256",
            "--reference",
            "arm=translate-act,lang=th",
            "--format",
            "csv",
        ],
        CSV,
    ),
    "confirm": lambda i, t: Case(
        [
            "confirm",
            "--replay",
            i.demo / "ledger",
            "--independent",
            i.demo / "independent",
            "--lang",
            "th",
            "--premiums",
            "th=2.55",
            "--budgets",
            "256,512",
            "--n-boot",
            "50",
            "--format",
            "json",
        ],
        JSON,
    ),
    "consistency": lambda i, t: Case(
        ["consistency", "--ledger", i.demo / "ledger", *STATS[:-2], "--splits", "2", "--format", "json"], JSON
    ),
    "protocol freeze": lambda i, t: Case(
        ["protocol", "freeze", _write(t / "p.toml", PROTOCOL), "--no-tag"], NOTHING, r"^frozen .*: sha256 [0-9a-f]{64}$"
    ),
    "protocol test": lambda i, t: Case(
        ["protocol", "test", i.protocol, "--ledger", i.byte_level / "ledger", "--format", "json"], JSON
    ),
    "price": lambda i, t: Case(
        price_tiny_args(i.byte_level / "ledger", i.byte_level / "base"),
        JSON,
        r"^Adaptation triage for tiny tha_Thai, 4 items",  # the triage notes, beside the JSON
    ),
    "generate": lambda i, t: Case(
        ["generate", _generate_job(i, t), "--out-dir", t / "gen", "--backend", "transformers"],
        NOTHING,
        r"^job streams: wrote 1 shards \(1 records, ",
    ),
    "audit": lambda i, t: Case(
        [
            "audit",
            "--ledger",
            i.demo / "ledger",
            "--out-dir",
            t / "aud",
            "--only",
            "parser",
            "--premiums",
            "de=1.56,th=2.55,sw=1.94",
            "--budgets",
            "64,128",
            "--n-boot",
            "50",
        ],
        NOTHING,
        r"^parser: ok \(",
    ),
    "roundtrip": lambda i, t: Case(
        ["roundtrip", _roundtrip_job(i, t), "--out-dir", t / "rt", "--backend", "transformers", "--format", "csv"],
        CSV,
        r"^round trip roundtrip: 1 samples ",
    ),
    "roundtrip report": lambda i, t: Case(
        [
            "roundtrip",
            "report",
            i.run_dir,
            "--out-dir",
            t / "rep",
            "--no-lid",
            "--no-premiums",
            "--n-boot",
            "50",
            "--format",
            "csv",
        ],
        CSV,
        rf"^wrote \d+ files to {t / 'rep'}$",
    ),
    "roundtrip compare": lambda i, t: Case(
        [
            "roundtrip",
            "compare",
            i.run_dir,
            "--out-dir",
            t / "cmp",
            "--n-boot",
            "50",
            "--n-perm",
            "10",
            "--format",
            "csv",
        ],
        CSV,
        rf"^wrote \d+ files to {t / 'cmp'}$",
    ),
    "render": lambda i, t: Case(
        [
            "render",
            "--ledger",
            i.native,
            "--out-dir",
            t / "rend",
            "--model",
            i.tiny,
            "--backend",
            "transformers",
            "--max-tokens",
            "4",
            "--keep-capped",
        ],
        NOTHING,
        r"^rendered \d of 2 native traces into ",
    ),
    "demo": lambda i, t: Case(
        ["demo", "--out-dir", t / "demo", "--items", "2", "--samples", "1"], NOTHING, r"^wrote \d+ simulated records"
    ),
}

COMMANDS = [" ".join(path) for path in leaf_commands()]


def invoke(args: list):
    """Run the CLI in this process, stdout and stderr apart (click 8.2+ keeps them apart)."""
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _check_product(text: str, kind: str) -> None:
    """``text`` is a whole product of ``kind``: strict JSON, a CSV of one header and rows of its width, nothing,
    or (any other ``kind``) text a regular expression matches whole."""
    if kind == JSON:
        json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    elif kind == CSV:
        rows = list(csv.reader(io.StringIO(text)))
        assert len(rows) >= 2 and all(len(r) == len(rows[0]) for r in rows), text
    elif kind == NOTHING:
        assert text == ""
    else:
        assert re.fullmatch(kind, text), text


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, request) -> Inputs:
    return Inputs(tmp_path_factory.mktemp("streams"), request.getfixturevalue)


def test_every_command_has_a_case():
    assert sorted(COMMANDS) == sorted(CASES), "give every command a case in CASES (and remove stale ones)"


@pytest.mark.parametrize("command", COMMANDS)
def test_stdout_holds_only_the_product_and_status_goes_to_stderr(command, inputs, tmp_path):
    case = CASES[command](inputs, tmp_path)
    res = invoke(case.args)
    assert res.exit_code == 0, res.output
    _check_product(res.stdout, case.stdout)
    if case.status is not None:
        assert any(re.search(case.status, line) for line in res.stderr.splitlines()), res.stderr
    if case.written is not None:
        path, kind = case.written
        _check_product(path.read_text("utf-8"), kind)
    assert "Traceback" not in res.stderr
    shutil.rmtree(tmp_path, ignore_errors=True)  # large outputs (reports, models) do not pile up
