"""Where data and tokenizers live: config file < environment < explicit arguments.

The config file is ``mindcap.toml``: the one named by ``MINDCAP_CONFIG``, else the first found walking up
from the current folder, else the user's (``~/.config/mindcap-tok/mindcap.toml`` on Linux: see
:func:`user_config_file`). Relative paths in it resolve against the file's folder.
"""

from __future__ import annotations

import functools
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ._io import regular_file
from .errors import BadInputError

CONFIG_NAME = "mindcap.toml"
ENV_CONFIG = "MINDCAP_CONFIG"
#: setting name -> environment variable that overrides it
ENV_VARS = {"data_dir": "MINDCAP_DATA_DIR", "tokenizers_dir": "MINDCAP_TOKENIZERS_DIR"}


@dataclass(frozen=True)
class Setting:
    """One resolved setting and where its value came from."""

    value: Path | None
    source: str  # "default", "config file <path>", "env MINDCAP_...", "flag"


@dataclass(frozen=True)
class Config:
    """Resolved paths; ``None`` means unset (data then comes from the Hugging Face hub)."""

    data_dir: Setting = field(default_factory=lambda: Setting(None, "unset"))
    tokenizers_dir: Setting = field(default_factory=lambda: Setting(None, "unset"))
    config_file: Path | None = None

    def as_dict(self) -> dict[str, dict[str, str | None]]:
        """Plain data for `mindcap-tok config`."""
        out: dict[str, dict[str, str | None]] = {}
        for name in ENV_VARS:
            s: Setting = getattr(self, name)
            out[name] = {"value": str(s.value) if s.value else None, "source": s.source}
        if self.config_file is not None:
            out["config_file"] = {"value": str(self.config_file), "source": ""}
        else:
            where = f"none in this folder or its parents, none at {user_config_file()} (the user config folder)"
            out["config_file"] = {"value": None, "source": where}
        return out


def hub_offline() -> bool:
    """Whether the user switched the Hugging Face hub off (``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE`` or
    ``HF_DATASETS_OFFLINE``): then nothing tries a download, and nothing waits on one."""
    return any(
        os.environ.get(v, "").strip().upper() in ("1", "ON", "YES", "TRUE")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
    )


#: seconds the hub probe waits for a connection before calling the hub unreachable
HUB_PROBE_TIMEOUT = 3.0


def hub_unavailable() -> str | None:
    """Why nothing should try the Hugging Face hub now, or ``None`` when it may.

    The user switched it off (``HF_HUB_OFFLINE`` …), or a TCP connection to it (``HF_ENDPOINT``, default
    huggingface.co, port 443) fails within :data:`HUB_PROBE_TIMEOUT` seconds; the probe runs once per endpoint and
    process. Without it, an offline machine waits about a minute in huggingface_hub's retry loop before any error.
    Behind a proxy (``HTTPS_PROXY``/``ALL_PROXY``) a direct probe proves nothing, so none is made.
    """
    from urllib.parse import urlsplit

    if hub_offline():
        return "the Hugging Face hub is off (HF_HUB_OFFLINE)"
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    url = urlsplit(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    return _probe_hub(url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443))


@functools.cache
def _probe_hub(host: str, port: int) -> str | None:
    import socket

    try:
        socket.create_connection((host, port), timeout=HUB_PROBE_TIMEOUT).close()
    except OSError as exc:
        return f"the Hugging Face hub ({host}) cannot be reached ({exc.strerror or type(exc).__name__})"
    return None


def user_config_file() -> Path:
    """Where the user's own ``mindcap.toml`` lives (the platform's config folder, via ``platformdirs``)."""
    import platformdirs

    return Path(platformdirs.user_config_dir("mindcap-tok")) / CONFIG_NAME


def find_config_file(start: Path | None = None) -> Path | None:
    """The config file in force: ``$MINDCAP_CONFIG``, else ``mindcap.toml`` in ``start`` or a parent, else the
    user's (:func:`user_config_file`)."""
    env = os.environ.get(ENV_CONFIG)
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise BadInputError(f"{ENV_CONFIG} names {path}, which is not a file")
        return path.resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    user = user_config_file()
    return user if user.is_file() else None


def _read_config_file(path: Path) -> dict[str, Path]:
    try:
        raw = tomllib.loads(regular_file(path, "config file").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BadInputError(f"cannot read config file {path}: {exc}") from exc
    except RecursionError as exc:  # tomllib parses nested arrays and tables recursively
        raise BadInputError(
            f"cannot read config file {path}: values nested too deeply for the TOML reader (a config file needs "
            "only a [paths] table of strings)"
        ) from exc
    paths = raw.get("paths", {})
    if not isinstance(paths, dict):
        raise BadInputError(f'config file {path}: [paths] must be a table (data_dir = "...", tokenizers_dir = ...)')
    wrong = sorted(k for k, v in paths.items() if k in ENV_VARS and not isinstance(v, str))
    if wrong:
        raise BadInputError(f"config file {path}: {', '.join(wrong)} under [paths] must be a string (a folder path)")
    unknown = sorted(set(paths) - set(ENV_VARS))
    if unknown:
        raise BadInputError(f"config file {path}: unknown setting(s) {', '.join(unknown)} under [paths]")
    return {k: (path.parent / v).resolve() for k, v in paths.items()}


def load_config(
    data_dir: str | os.PathLike[str] | None = None,
    tokenizers_dir: str | os.PathLike[str] | None = None,
    *,
    start: Path | None = None,
) -> Config:
    """Resolve every setting; explicit arguments beat the environment, which beats the file."""
    cfg_file = find_config_file(start)
    from_file = _read_config_file(cfg_file) if cfg_file else {}
    explicit = {"data_dir": data_dir, "tokenizers_dir": tokenizers_dir}
    resolved: dict[str, Setting] = {}
    for name, env_var in ENV_VARS.items():
        given = explicit[name]
        if given is not None:
            resolved[name] = Setting(Path(given).expanduser().resolve(), "flag")
        elif os.environ.get(env_var):
            resolved[name] = Setting(Path(os.environ[env_var]).expanduser().resolve(), f"env {env_var}")
        elif name in from_file:
            resolved[name] = Setting(from_file[name], f"config file {cfg_file}")
        else:
            resolved[name] = Setting(None, "unset")
    return Config(config_file=cfg_file, **resolved)
