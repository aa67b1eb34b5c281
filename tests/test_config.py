from pathlib import Path

import pytest

from mindcap_tok.config import load_config
from mindcap_tok.errors import MindcapError


def _write_cfg(folder: Path, body: str) -> Path:
    path = folder / "mindcap.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_precedence_file_then_env_then_flag(tmp_path, monkeypatch):
    monkeypatch.delenv("MINDCAP_CONFIG", raising=False)
    monkeypatch.delenv("MINDCAP_DATA_DIR", raising=False)
    monkeypatch.delenv("MINDCAP_TOKENIZERS_DIR", raising=False)
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    cfg_file = _write_cfg(tmp_path, '[paths]\ndata_dir = "d"\ntokenizers_dir = "t"\n')

    cfg = load_config(start=sub)  # found by walking up; relative to the file's folder
    assert cfg.config_file == cfg_file
    assert cfg.data_dir.value == (tmp_path / "d").resolve()
    assert cfg.data_dir.source.startswith("config file")

    monkeypatch.setenv("MINDCAP_DATA_DIR", str(tmp_path / "env"))
    cfg = load_config(start=sub)
    assert cfg.data_dir.value == (tmp_path / "env").resolve()
    assert cfg.data_dir.source == "env MINDCAP_DATA_DIR"
    assert cfg.tokenizers_dir.value == (tmp_path / "t").resolve()

    cfg = load_config(data_dir=tmp_path / "flag", start=sub)
    assert cfg.data_dir.value == (tmp_path / "flag").resolve()
    assert cfg.data_dir.source == "flag"


def test_unset_without_file(tmp_path, monkeypatch):
    for var in ("MINDCAP_CONFIG", "MINDCAP_DATA_DIR", "MINDCAP_TOKENIZERS_DIR"):
        monkeypatch.delenv(var, raising=False)
    cfg = load_config(start=tmp_path)
    if cfg.config_file is None:  # a mindcap.toml above tmp_path would be found legitimately
        assert cfg.data_dir.value is None and cfg.data_dir.source == "unset"


def test_bad_config_file_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MINDCAP_CONFIG", str(_write_cfg(tmp_path, "[paths]\nfoo = 1\n")))
    with pytest.raises(MindcapError, match="unknown setting"):
        load_config()
    monkeypatch.setenv("MINDCAP_CONFIG", str(_write_cfg(tmp_path, "[paths\n")))
    with pytest.raises(MindcapError, match="cannot read config file"):
        load_config()
    monkeypatch.setenv("MINDCAP_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(MindcapError, match="not a file"):
        load_config()


def test_the_users_config_file_is_found_from_any_folder(tmp_path, monkeypatch):
    for var in ("MINDCAP_CONFIG", "MINDCAP_DATA_DIR", "MINDCAP_TOKENIZERS_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # platformdirs' Linux config folder
    user = tmp_path / "xdg" / "mindcap-tok" / "mindcap.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[paths]\ndata_dir = "data"\n', encoding="utf-8")
    elsewhere = tmp_path / "work" / "project"
    elsewhere.mkdir(parents=True)
    cfg = load_config(start=elsewhere)
    assert cfg.config_file == user and cfg.data_dir.value == (user.parent / "data").resolve()
    nearer = _write_cfg(tmp_path / "work", '[paths]\ndata_dir = "mine"\n')  # a project's file comes first
    assert load_config(start=elsewhere).config_file == nearer


def test_debug_flag_shows_the_traceback_when_main_is_called_with_argv(tmp_path, capsys):
    from mindcap_tok.cli.main import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text("[1]\n")
    for argv, traceback in (
        (["ledger", "import", str(bad), "--out-dir", str(tmp_path / "l")], False),
        (["--debug", "ledger", "import", str(bad), "--out-dir", str(tmp_path / "l")], True),
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "expected a JSON object" in err
        assert ("Traceback" in err) is traceback


def test_offline_without_local_tokenizers_fails_at_once_naming_the_config(tmp_path, monkeypatch):
    import time

    from click.testing import CliRunner

    from mindcap_tok.cli.main import cli

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    res = CliRunner().invoke(cli, ["--tokenizers-dir", str(tmp_path / "none"), "premium", "--model", "qwen3-8b"])
    assert res.exit_code == 2 and time.monotonic() - start < 10
    assert "mindcap.toml" in res.output and "MINDCAP_TOKENIZERS_DIR" in res.output and "--tokenizers-dir" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_offline_without_local_flores_fails_at_once_naming_the_config(tmp_path, monkeypatch):
    from mindcap_tok.data.flores import load_flores

    for var in ("MINDCAP_CONFIG", "MINDCAP_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(MindcapError, match=r"HF_HUB_OFFLINE.*mindcap\.toml.*MINDCAP_DATA_DIR.*--data-dir"):
        load_flores("th", source="hf:openlanguagedata/flores_plus")


def _closed_endpoint() -> str:
    """An endpoint with nothing listening: a local TCP port bound, then released, named ``localhost`` (the hub is
    probed once per endpoint and process, and the listening servers below are named ``127.0.0.1``)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://localhost:{s.getsockname()[1]}"


@pytest.fixture
def probe(monkeypatch):
    """The hub probe with the proxy variables and HF_HUB_OFFLINE unset."""
    from mindcap_tok import config

    for var in (
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(var, raising=False)
    return config


def test_an_unreachable_hub_is_noticed_without_waiting(probe, monkeypatch):
    import socket

    monkeypatch.setenv("HF_ENDPOINT", _closed_endpoint())
    assert "(localhost) cannot be reached" in probe.hub_unavailable()
    with socket.socket() as server:  # something listening: the hub may be tried
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert probe.hub_unavailable() is None
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_ENDPOINT", _closed_endpoint())
    assert probe.hub_unavailable() is None  # behind a proxy a direct probe proves nothing
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "HF_HUB_OFFLINE" in probe.hub_unavailable()


def test_unreachable_hub_without_local_tokenizers_fails_within_seconds(probe, tmp_path, monkeypatch):
    import time

    from click.testing import CliRunner

    from mindcap_tok.cli.main import cli

    monkeypatch.setenv("HF_ENDPOINT", _closed_endpoint())
    start = time.monotonic()
    res = CliRunner().invoke(cli, ["--tokenizers-dir", str(tmp_path / "none"), "premium", "--model", "qwen3-8b"])
    assert res.exit_code == 2 and time.monotonic() - start < 10
    assert "cannot be reached" in res.output and "mindcap.toml" in res.output and "--tokenizers-dir" in res.output
