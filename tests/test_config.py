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
