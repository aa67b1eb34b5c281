"""`roundtrip compare`: a leaderboard across hand-built runs (tests/roundtrip_factory.py), rank stability, Spearman
ρ against an outside ranking with an exact permutation p-value worked by hand, mixed runs refused, the CLI."""

from __future__ import annotations

import json

import pytest

from mindcap_tok.cli.main import main
from mindcap_tok.errors import BadInputError, MindcapError
from mindcap_tok.roundtrip.compare import CompareOptions, compare_runs
from roundtrip_factory import write_run

TEXTS = {f"t{i}": f"Text {i} tells of the market by the harbour at dawn." for i in range(4)}
ISSUES = {100: (0, 0, 0), 70: (0, 6, 0), 50: (0, 0, 2)}
MQMS = {"m1": (100, 100, 100, 100), "m2": (100, 100, 70, 70), "m3": (50, 50, 50, 100)}  # pass 1, 1/2, 1/4
OPTS = CompareOptions(n_boot=200, seed=2)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, qwen):
    tmp = tmp_path_factory.mktemp("cmp")
    out = []
    for model, vals in MQMS.items():
        judged = {(model, "judge", t): ("7-good", *ISSUES[v]) for t, v in zip(TEXTS, vals, strict=True)}
        out.append(write_run(tmp / model, qwen, TEXTS, judged, models=(model,), judges=("judge",)))
    other = {"t9": "A different text altogether, about trains."}
    mixed = write_run(
        tmp / "m4", qwen, other, {("m4", "judge", "t9"): ("7-good", 0, 0, 0)}, models=("m4",), judges=("judge",)
    )
    ref = tmp / "elo.csv"
    ref.write_text("model,score\nm1,1400\nm2,1380\nm3,1390\n", "utf-8")
    return out, mixed, ref


def test_leaderboard_ranks_stability_and_reference(runs, tmp_path):
    dirs, _, ref = runs
    result = compare_runs(run_dirs=dirs, out_dir=tmp_path / "cmp", reference=ref, options=OPTS)
    board = result.leaderboard.set_index("model")
    assert board["rank"].to_dict() == {"m1": 1, "m2": 2, "m3": 3}
    assert board["pass_share"].to_dict() == {"m1": 1.0, "m2": 0.5, "m3": 0.25}
    assert board.loc["m2", "mean_mqm"] == pytest.approx(85.0) and board.loc["m3", "mean_mqm"] == pytest.approx(62.5)
    # m1 passes every text: no replicate puts anyone above it (a tie keeps rank 1)
    assert board.loc["m1", "rank_kept_share"] == 1.0
    assert 0 < board.loc["m3", "rank_kept_share"] < 1 and board.loc["m2", "pass_share_se"] > 0
    # reference ranks m1 > m3 > m2 against m1 > m2 > m3: ρ = 1 - 6·2/24 = 0.5; exact one-sided p: 3 of 3! pairings
    (row,) = result.reference.to_dict("records")
    assert row["rho"] == pytest.approx(0.5) and row["p_one_sided"] == pytest.approx(3 / 6)
    assert row["n_permutations"] == 6 and row["n_models"] == 3
    assert set(result.files) == {
        "leaderboard.csv",
        "metrics.csv",
        "compare.json",
        "compare.md",
        "leaderboard.png",
        "reference.csv",
        "reference.png",
    }
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text("utf-8"))
    assert data["mixed"] == [] and data["reference"]["n_permutations"] == 10_000
    assert {m["by"] for m in data["metrics"]} == {"overall", "sequence", "resource", "category"}
    assert "## Against the reference ranking" in (tmp_path / "cmp" / "compare.md").read_text("utf-8")


def test_a_reference_with_too_few_models_gets_a_figure_that_says_why(runs, tmp_path, monkeypatch):
    from mindcap_tok.report import figures

    dirs, _, _ = runs
    ref = tmp_path / "two.csv"
    ref.write_text("model,score\nm1,1400\nm2,1380\n", "utf-8")
    caught = {}
    monkeypatch.setattr(figures, "save_figure", lambda fig, path, **kw: caught.update({path.name: fig}))
    result = compare_runs(run_dirs=dirs, out_dir=tmp_path / "cmp", reference=ref, options=OPTS)
    assert result.reference.empty and {"reference.csv", "reference.png"} <= set(result.files)
    (ax,) = caught["reference.png"].axes
    words = " ".join(t.get_text() for t in ax.texts).replace("\n", " ")
    assert words == (
        "nothing to show, because only 2 model(s) judged by judge are in the reference ranking, and a rank "
        "agreement needs at least 3"
    )
    title = caught["leaderboard.png"].axes[0].get_title().replace("\n", " ")
    assert title.startswith("Round-trip leaderboard of 3 models, judged by judge")


def test_mixed_runs_are_refused_unless_allowed(runs, tmp_path):
    dirs, mixed, _ = runs
    with pytest.raises(MindcapError, match=r"different texts; give --allow-mixed"):
        compare_runs(run_dirs=[*dirs, mixed], out_dir=tmp_path / "a", options=OPTS)
    result = compare_runs(
        run_dirs=[*dirs, mixed], out_dir=tmp_path / "b", options=CompareOptions(n_boot=50, allow_mixed=True)
    )
    assert result.summary["mixed"] == ["texts"]
    assert "**Mixed runs**: they used different texts" in (tmp_path / "b" / "compare.md").read_text("utf-8")
    with pytest.raises(MindcapError, match="is in two runs"):
        compare_runs(run_dirs=[dirs[0], dirs[0]], out_dir=tmp_path / "c", options=OPTS)


def run_cli(args: list[str], code: int = 0) -> None:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == code


def test_cli_compare_and_a_bad_reference(runs, tmp_path, capsys):
    dirs, _, ref = runs
    run_cli(
        [
            "roundtrip",
            "compare",
            *map(str, dirs),
            "--reference-ranking",
            str(ref),
            "--out-dir",
            str(tmp_path / "cli"),
            "--n-boot",
            "50",
            "--format",
            "json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in out["leaderboard"]] == ["m1", "m2", "m3"]
    assert out["against_reference"][0]["rho"] == pytest.approx(0.5)
    bad = tmp_path / "bad.csv"
    bad.write_text("model,elo\nm1,1\n", "utf-8")
    run_cli(
        ["roundtrip", "compare", str(dirs[0]), "--reference-ranking", str(bad), "--out-dir", str(tmp_path / "x")],
        code=2,
    )
    err = capsys.readouterr().err
    assert "lacks the column(s) score (model,score)" in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()


def _judges_of_run(args: list[str], monkeypatch) -> tuple:
    """The judges of the spec that ``roundtrip ARGS`` would open backends for (the run stops there)."""
    import mindcap_tok.roundtrip as rt

    seen = {}

    def stop(spec, backend):
        seen["spec"] = spec
        raise BadInputError("stopped before any backend")

    monkeypatch.setattr(rt, "open_backends", stop)
    run_cli(["roundtrip", *args], code=2)
    return seen["spec"].judges


def test_cli_judge_flags_apply_to_each_judge_of_the_file(tmp_path, monkeypatch, capsys):
    job = tmp_path / "job.toml"
    job.write_text('model = "org/m"\n[[judge]]\nmodel = "a"\nretries = 0\n[[judge]]\nmodel = "b"\n', "utf-8")
    flags = [
        "--out-dir",
        str(tmp_path / "r"),
        "--sequences",
        "en>de>en",
        "--judge-base-url",
        "http://j:8000/v1",
        "--no-judge-structured",
    ]
    judges = _judges_of_run([str(job), *flags], monkeypatch)
    assert [(j.model.path, j.retries, j.base_url, j.structured) for j in judges] == [
        ("a", 0, ("http://j:8000/v1",), False),
        ("b", 2, ("http://j:8000/v1",), False),  # the default retries: the first judge's are not shared
    ]
    job.write_text('model = "org/m"\n[judge]\nretries = 1\n', "utf-8")
    judges = _judges_of_run([str(job), *flags, "--judge-model", "x", "y"], monkeypatch)
    assert [(j.model.path, j.retries, j.base_url, j.structured) for j in judges] == [
        ("x", 1, ("http://j:8000/v1",), False),
        ("y", 1, ("http://j:8000/v1",), False),
    ]
    assert "stopped before any backend" in capsys.readouterr().err


def _copy_run(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def _one_line_refusal(args, capsys, *names):
    run_cli(args, code=2)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "Error:" not in err, err
    for name in names:
        assert str(name) in err, err
    return err


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda m: m["spec"].pop("sequences"), "spec.sequences"),  # a missing key
        (lambda m: m.update(files=["hops/hop-01.parquet"]), "files"),  # a list where a table belongs
        (lambda m: m.update(spec="qwen3"), "spec"),  # a string where a table belongs
        (lambda m: m["spec"]["models"][0].pop("name"), "spec.models[0].name"),
        (lambda m: m["files"].update({"../../elsewhere.parquet": m["files"]["hops/hop-01.parquet"]}), "files"),
    ],
)
def test_a_damaged_manifest_is_one_line_naming_it(runs, tmp_path, capsys, damage, says):
    dirs, _, _ = runs
    run = _copy_run(dirs[0], tmp_path / "run")
    manifest = json.loads((run / "_roundtrip.json").read_text("utf-8"))
    damage(manifest)
    (run / "_roundtrip.json").write_text(json.dumps(manifest), "utf-8")
    err = _one_line_refusal(
        ["roundtrip", "compare", str(run), str(dirs[1]), "--out-dir", str(tmp_path / "cmp")],
        capsys,
        run / "_roundtrip.json",
        says,
    )
    assert "is damaged" in err and not (tmp_path / "cmp").exists()


def _add_hop(run, qwen, rows_of):
    """Commit one more hop file into a copied run with the run store's own writer (so its hash is listed)."""
    from mindcap_tok.roundtrip.store import HOP_SCHEMA, RunStore

    manifest = json.loads((run / "_roundtrip.json").read_text("utf-8"))
    store = RunStore(run, manifest["identity"], manifest["spec"])
    row = store.read("hops/hop-02.parquet")[0]
    name, rows = rows_of(row)
    store.write(name, rows, HOP_SCHEMA)
    return run / name


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda r: ("hops/hop-03.parquet", [{**r, "hop": 3}]), "past the sequence's last language (2 hops)"),
        (lambda r: ("hops/hop-03.parquet", [{**r, "hop": 3, "text_id": "t99"}]), "does not have"),
        (lambda r: ("hops/hop-03.parquet", [{**r, "hop": 2}]), "out of order"),
        (lambda r: ("hops/hop-03.parquet", [{**r, "hop": 3, "sequence": "eng_Latn>fra_Latn"}]), "does not have"),
        (lambda r: ("hops/hop-03.parquet", [{**r, "hop": None}]), "records without hop"),
    ],
)
def test_hop_records_that_disagree_with_the_spec_are_one_line(runs, tmp_path, capsys, qwen, edit, says):
    dirs, _, _ = runs
    run = _copy_run(dirs[0], tmp_path / "run")
    path = _add_hop(run, qwen, edit)
    _one_line_refusal(["roundtrip", "compare", str(run), "--out-dir", str(tmp_path / "cmp")], capsys, path, says)
    assert not (tmp_path / "cmp").exists()


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "NaN"])
def test_a_reference_score_that_is_not_finite_is_one_line(runs, tmp_path, capsys, value):
    dirs, _, _ = runs
    ref = tmp_path / "elo.csv"
    ref.write_text(f"model,score\nm1,1400\nm2,{value}\nm3,1390\n", "utf-8")
    args = ["roundtrip", "compare", *map(str, dirs), "--reference-ranking", str(ref), "--out-dir", str(tmp_path / "c")]
    err = _one_line_refusal(args, capsys, ref)
    assert "not a finite number for m2" in err and not (tmp_path / "c").exists()


def test_the_comparison_is_never_written_inside_a_run_folder(runs, tmp_path, capsys):
    dirs, _, _ = runs
    other = _copy_run(dirs[2], tmp_path / "other")  # a run that is not among the compared ones
    before = sorted(p.relative_to(other).as_posix() for p in other.rglob("*"))
    for out in (other / "cmp", other / "hops" / "cmp"):
        _one_line_refusal(["roundtrip", "compare", *map(str, dirs[:2]), "--out-dir", str(out)], capsys, other)
    assert sorted(p.relative_to(other).as_posix() for p in other.rglob("*")) == before
    run_cli(["roundtrip", "report", str(dirs[0]), "--out-dir", str(other / "rep")], code=2)
    assert "inside the round-trip run folder" in capsys.readouterr().err and not (other / "rep").exists()
