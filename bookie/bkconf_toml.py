"""BC4: a TOML settings file given to ``-c``/``--conf`` (BookKeeper's bk_server.conf) is
refused, not read as Java properties.

Read as properties, a TOML file "works": every ``key = value`` line becomes a key, none of
them BookKeeper's, so the bookie warns about unknown keys and serves on its defaults
(./data, port 3180), far from what the file says. The test must not refuse a real
bk_server.conf, whose ``key=value`` lines may parse as TOML too (``bookiePort=3181``,
``allowLoopback=true``). A file is taken for TOML when its name ends in ``.toml``, or when it
parses as TOML and has something a bk_server.conf cannot mean: a ``[table]``, a quoted
string or an array (Java properties keep quotes and brackets as part of the value: no
BookKeeper value has them), or a key that is one of this bookie's settings and no
BookKeeper key (``data_dir``, ``port``)."""

from __future__ import annotations

import os
import tomllib

from bookie.bkconf_keys import KNOWN
from bookie.settings import SETTINGS_BY_NAME


def toml_signs(path: str, text: str) -> str | None:
    """Why ``path`` looks like TOML, or None when it may be a bk_server.conf."""
    if os.path.basename(path).lower().endswith(".toml"):
        return "its name ends in .toml"
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None  # not TOML: a properties file (paths, hosts, class names unquoted)
    for key, value in document.items():
        if isinstance(value, dict):
            return f"[{key}] is a TOML table"
        if isinstance(value, (str, list)):
            return f"{key} = {_shown(value)} is a TOML {'string' if isinstance(value, str) else 'array'}"
        if key in SETTINGS_BY_NAME and key not in KNOWN:
            return f"{key} is a setting of --config, not a bk_server.conf key"
    return None


def _shown(value) -> str:
    text = f'"{value}"' if isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
