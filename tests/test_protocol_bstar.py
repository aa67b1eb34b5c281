"""B* from the protocol's rule (the largest B in `from` with every floor(r·B) <= max_scaled), worked by hand."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest
from click.testing import CliRunner

from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.spec import BstarRule, SpecError, check_bstar
from mindcap_tok.stats.protocol import bstar_from_rule, freeze_path, freeze_protocol, load_protocol

# the paper's Qwen3 FLORES premiums: floor(1024·2.551) = 2612, floor(512·2.551) = 1306, floor(1024·1.936) = 1982
PREMIUMS = [Fraction("1.559"), Fraction("2.551"), Fraction("1.936")]

HEAD = 'name = "b"\nmodel = "qwen3-8b"\nn_boot = 100\n'
PREMS = "[premiums]\nde = 1.559\nth = 2.551\nsw = 1.936\n"
HYPS = (
    '[[hypotheses]]\nid = "H1"\nkind = "delta"\nlangs = ["de", "th", "sw"]\nbudget = "bstar"\n'
    '[[hypotheses]]\nid = "H3"\nkind = "contrast"\n'
    'a = { arm = "native", lang = "th", budget = "bstar", scaled = true }\n'
    'b = { arm = "translate-act", lang = "th", budget = 1024 }\n'
)


def _rule(cands, max_scaled):
    return check_bstar({"from": cands, "max_scaled": max_scaled})


def test_rule_by_hand():
    assert bstar_from_rule(_rule([512, 1024], 4096), PREMIUMS) == 1024  # 2612 <= 4096
    assert bstar_from_rule(_rule([512, 1024], 2611), PREMIUMS) == 512  # 2612 > 2611 >= 1306
    assert bstar_from_rule(_rule([512, 1024], 2612), PREMIUMS) == 1024  # the bound is inclusive
    assert bstar_from_rule(_rule([1024, 512], 2000), [Fraction("1.936")]) == 1024  # 1982 <= 2000; order is free
    with pytest.raises(MindcapError, match=r"no budget of \[512, 1024\] keeps floor\(r·B\) <= 1305"):
        bstar_from_rule(_rule([512, 1024], 1305), PREMIUMS)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"from": [], "max_scaled": 4096}, "bstar.from: must not be an empty list"),
        ({"from": [512], "max_scaled": 0}, "bstar.max_scaled: must be an integer in 1..1048576, got 0"),
        ({"from": [512], "max_scaled": 9, "max": 1}, "bstar.max: unknown key; known: from, max_scaled"),
        ({"from": [512.0], "max_scaled": 4096}, "bstar.from[0]: must be of type int, got 512.0"),
        (True, "bstar: must be a budget or a table"),
    ],
)
def test_bad_rules_are_refused_in_one_line(value, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        check_bstar(value)
    assert isinstance(_rule([512], 4096), BstarRule)


def test_typed_bstar_is_still_accepted(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(HEAD + "bstar = 512\n" + PREMS + HYPS, "utf-8")
    proto = load_protocol(path)  # no freeze needed for a typed B*
    assert proto.bstar == 512 and proto.hypotheses[0].budget == 512 and proto.hypotheses[1].a["budget"] == 512
    assert proto.hypotheses[1].b["budget"] == 1024


def test_rule_is_computed_at_freeze_and_recorded(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(HEAD + "bstar = { from = [512, 1024], max_scaled = 2611 }\n" + PREMS + HYPS, "utf-8")
    with pytest.raises(MindcapError, match="computed from its rule when the protocol is frozen"):
        load_protocol(path)
    record = freeze_protocol(path, tag=False)
    assert record.bstar == 512
    assert json.loads(freeze_path(path).read_text())["bstar"] == 512
    proto = load_protocol(path)
    assert proto.bstar == 512 and proto.hypotheses[0].budget == 512 and proto.hypotheses[1].a["budget"] == 512


def test_bstar_budget_without_a_declared_bstar_is_refused(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(HEAD + PREMS + HYPS, "utf-8")
    with pytest.raises(MindcapError, match='a budget "bstar" needs a top-level bstar'):
        load_protocol(path)


def test_cli_freeze_computes_bstar_from_the_models_own_premiums(tmp_path):
    # Qwen3's FLORES premiums (de 1.559, th 2.551, sw 1.936): floor(1024·r_th) = 2612 > 2600, floor(512·r_th) = 1306
    path = tmp_path / "p.toml"
    path.write_text(HEAD + 'premiums = "qwen3-8b"\nbstar = { from = [512, 1024], max_scaled = 2600 }\n' + HYPS, "utf-8")
    res = CliRunner().invoke(cli, ["protocol", "freeze", str(path), "--no-tag"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "B* = 512" in res.output and load_protocol(path).hypotheses[0].budget == 512
