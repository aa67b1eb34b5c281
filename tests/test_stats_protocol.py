"""Protocol files: parsing, freezing (hash sidecar; git tag in a temporary repository), refusal of changed
files, and a family run on a simulated ledger whose effects are known."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.stats.curves import delta_table, gap_table
from mindcap_tok.stats.family import Hypothesis, family_budgets
from mindcap_tok.stats.premiums import premium_table
from mindcap_tok.stats.protocol import (
    freeze_path,
    freeze_protocol,
    load_protocol,
    run_protocol,
    verify_protocol,
)
from simulate import paper_like_design, simulate

TOML = """\
name = "sim-family"
model = "sim-8b"
alpha = 0.05
n_boot = 2000
seed = 3
tail_factor = 1.3
[premiums]
de = 1.56
th = 2.55
sw = 1.94

[[hypotheses]]
id = "H1-peak-th"
kind = "delta"
lang = "th"
budget = 192
margin = 5

[[hypotheses]]
id = "H1-existence"
kind = "delta"
langs = ["de", "sw"]
budget = 1024

[[hypotheses]]
id = "H2"
kind = "delta-difference"
lang = "th"
other = "de"
budget = 192

[[hypotheses]]
id = "EQ-de"
kind = "equivalence-check"
"""

GOOD_EQ = (
    TOML.replace(
        'kind = "equivalence-check"',
        'kind = "delta"\nlang = "de"\nbudget = 1024\nalternative = "equivalence"\nmargin = 5',
    )
    + """
[[hypotheses]]
id = "H3-th"
kind = "contrast"
alternative = "less"
a = { arm = "native", lang = "th", budget = 256 }
b = { arm = "translate-act", lang = "th", budget = 256 }
"""
)

YAML = """\
name: sim-family
model: sim-8b
n_boot: 2000
seed: 3
premiums: {de: 1.56, th: 2.55}
hypotheses:
  - {id: H1-peak-th, kind: delta, lang: th, budget: 192, margin: 5}
"""


def _write(tmp_path, text, name="proto.toml"):
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return path


def _git_repo(repo: Path) -> Callable[..., str]:
    """Create an empty git repository with a committer at ``repo``; return ``git(*args)``, run there, giving stdout."""
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "Test")
    return git


def test_unknown_kind_and_keys_are_refused(tmp_path):
    with pytest.raises(MindcapError, match="kind must be one of"):
        load_protocol(_write(tmp_path, TOML))
    with pytest.raises(MindcapError, match="unknown key"):
        load_protocol(_write(tmp_path, GOOD_EQ.replace("seed = 3", "sed = 3")))


def test_toml_and_yaml_declare_the_same_hypothesis(tmp_path):
    a = load_protocol(_write(tmp_path, GOOD_EQ))
    b = load_protocol(_write(tmp_path, YAML, "proto.yaml"))
    assert a.hypotheses[0] == b.hypotheses[0]
    assert a.hypotheses[0].langs == ("tha_Thai",) and a.tail_factor == 1.3 and b.tail_factor == 1.0


def test_freeze_outside_git_then_refuse_a_changed_file(tmp_path):
    path = _write(tmp_path, GOOD_EQ)
    rec = freeze_protocol(path)
    assert rec.tag is None and len(rec.sha256) == 64
    assert json.loads(freeze_path(path).read_text())["sha256"] == rec.sha256
    assert verify_protocol(path).sha256 == rec.sha256
    assert freeze_protocol(path) == rec  # idempotent
    path.write_text(GOOD_EQ.replace("margin = 5", "margin = 4"), "utf-8")
    with pytest.raises(MindcapError, match="differs from the frozen"):
        verify_protocol(path)
    with pytest.raises(MindcapError, match="has changed since"):
        freeze_protocol(path)
    with pytest.raises(MindcapError, match="not inside a git repository"):
        freeze_protocol(_write(tmp_path, GOOD_EQ, "other.toml"), tag=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_freeze_in_a_git_repository_records_an_annotated_tag(tmp_path):
    repo = tmp_path / "repo"
    git = _git_repo(repo)
    path = _write(repo, GOOD_EQ)
    git("add", "proto.toml")
    git("commit", "-q", "-m", "protocol")
    rec = freeze_protocol(path)
    assert rec.tag == f"protocol/sim-family-{rec.sha256[:12]}" and rec.file_committed
    assert rec.commit == git("rev-parse", "HEAD").strip()
    assert f"sha256: {rec.sha256}" in git("cat-file", "-p", f"refs/tags/{rec.tag}")
    assert verify_protocol(path) == rec
    git("tag", "-d", rec.tag)  # a record whose tag vanished is refused
    with pytest.raises(MindcapError, match="tag"):
        verify_protocol(path)
    # --no-tag never touches the repository
    other = _write(repo, GOOD_EQ.replace("sim-family", "second"), "second.toml")
    assert freeze_protocol(other, tag=False).tag is None
    assert "second" not in git("tag", "--list")


@pytest.fixture(scope="module")
def by_budget():
    design = paper_like_design()
    data = simulate(design, seed=8)
    return data.by_budget([64, 128, 192, 256, 299, 372, 384, 489, 512, 652, 1024, 1597, 1986, 2611])


def test_family_on_a_simulated_ledger(tmp_path, by_budget):
    path = _write(tmp_path, GOOD_EQ)
    proto = load_protocol(path)
    table = premium_table(proto.premiums)
    assert family_budgets(proto.hypotheses, table, models=["sim-8b"]) == [192, 256, 299, 489, 1024, 1597, 1986]
    res = run_protocol(proto, by_budget, premiums=table)
    t = res.table.set_index("id")
    delta = delta_table(by_budget, table, budgets=[192, 1024]).set_index(["lang", "budget"])["delta"]
    assert t.loc["H1-peak-th", "estimate"] == pytest.approx(100 * delta[("tha_Thai", 192)])
    assert t.loc["H2", "estimate"] == pytest.approx(100 * (delta[("tha_Thai", 192)] - delta[("deu_Latn", 192)]))
    gap = gap_table(by_budget).set_index(["lang", "budget"])["gap"]
    assert t.loc["H3-th", "estimate"] == pytest.approx(-100 * gap[("tha_Thai", 256)])
    # large effects reject; Δ at the saturated budget does not exceed 0 but is within ±5 points
    assert t.loc["H1-peak-th", "decision"] == "reject" and t.loc["H1-peak-th", "p_value"] == pytest.approx(1 / 2001)
    assert t.loc["H1-existence", "decision"] == "retain"
    assert t.loc[["H2", "EQ-de", "H3-th"], "decision"].eq("reject").all()
    assert res.outcome == "partial_support" and res.seed == 3 and res.tail_factor == 1.3
    np.testing.assert_allclose(t["holm_threshold"].sort_values().to_numpy(), 0.05 / np.array([5, 4, 3, 2, 1]))


def test_the_example_protocol_parses_and_lists_its_budgets():
    proto = load_protocol(Path(__file__).resolve().parents[1] / "examples" / "protocol_bstar.toml")
    assert [h.id for h in proto.hypotheses] == ["H1-existence", "H1-SESOI", "H2", "H3-de", "H3-th", "H3-sw"]
    table = premium_table({"de": 1.56, "th": 2.55, "sw": 1.94})
    assert family_budgets(proto.hypotheses, table, models=["qwen3-8b"]) == [1024, 1597, 1986, 2611]


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_the_git_tag_carries_the_hash_of_the_premiums_file(tmp_path):
    import hashlib

    repo = tmp_path / "repo"
    git = _git_repo(repo)
    prem = repo / "prem.json"
    prem.write_text(json.dumps([{"lang": "th", "premium": 2.55}, {"lang": "de", "premium": 1.56}]), "utf-8")
    path = _write(repo, YAML.replace("premiums: {de: 1.56, th: 2.55}", "premiums: prem.json"), "proto.yaml")
    git("add", ".")
    git("commit", "-q", "-m", "protocol")
    rec = freeze_protocol(path)
    sha = hashlib.sha256(prem.read_bytes()).hexdigest()
    assert rec.inputs == {"prem.json": sha}
    assert f"input prem.json: sha256 {sha}" in git("cat-file", "-p", f"refs/tags/{rec.tag}")
    assert verify_protocol(path) == rec
    prem.write_text(prem.read_text("utf-8").replace("2.55", "1.2"), "utf-8")
    with pytest.raises(MindcapError, match=r"refusing .*proto\.yaml: prem\.json changed after the freeze"):
        verify_protocol(path)


def test_a_hypothesis_built_without_its_budget_is_named_not_a_type_error():
    """A Hypothesis built directly (no from_dict validation) that lacks what its kind needs is refused by name."""
    with pytest.raises(MindcapError, match="hypothesis h1: delta needs budget"):
        family_budgets([Hypothesis(id="h1", kind="delta", langs=("th",))], None, models=["m"])
