"""Render the generated tables of docs/http-api.md and docs/operations.md from the code.

Four tables are never written by hand:

* ``endpoints``: every operation of ``api/server/openapi.py``'s ``SPEC`` (method, path, summary,
  statuses, admin), in the spec's order;
* ``settings``: every ``Setting`` of ``bookie/config.py``'s ``SETTINGS`` (name, type,
  default, environment variable, flag, range, description), in the table's order;
* ``bk-server-conf`` (docs/operations.md): every BookKeeper bk_server.conf key
  ``bookie/bkconf_keys.py`` knows and what ``--conf`` does with it;
* ``bk-metric-names`` (docs/operations.md): every bookie-side metric name of BookKeeper's
  in ``api/server/metrics_bk_names.py``: exported or why not, and ours beside it.

Each lives between ``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->``
in its doc (``DOCS``). ``python scripts/gen_docs.py`` rewrites them in place;
``python scripts/gen_docs.py --check`` changes nothing and exits 1 with a unified diff when
the doc is stale. ``tests/contract/test_docs_match_code.py`` runs the same rendering and
names the rows that are missing or left over.
"""

from __future__ import annotations

import argparse
import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from api.server.metrics_bk_names import NAMES  # noqa: E402
from api.server.openapi import SPEC  # noqa: E402
from bookie import bkconf_keys  # noqa: E402
from bookie.config import SETTINGS, Setting  # noqa: E402

DOC = ROOT / "docs" / "http-api.md"
OPERATIONS = ROOT / "docs" / "operations.md"
METHODS = ("get", "put", "post", "delete")
#: Setting help texts still cite the team's old reference files; the doc names their
#: successors in docs/.
_OLD_NAMES = {"docs/cluster.md": "docs/cluster.md", "docs/http-api.md": "docs/http-api.md",
              "docs/formats.md": "docs/formats.md", "docs/design.md": "docs/design.md"}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def endpoint_rows(spec: dict = SPEC) -> list[tuple[str, str]]:
    """(key, markdown row) per operation; key is ``METHOD path``."""
    rows = []
    for path, item in spec["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            statuses = ", ".join(sorted(op["responses"]))
            admin = "yes" if op.get("security") else ""
            key = f"{method.upper()} {path}"
            rows.append((key, f"| `{method.upper()}` | `{path}` | {_cell(op['summary'])} "
                              f"| {statuses} | {admin} |"))
    return rows


def _is_bytes(setting: Setting) -> bool:
    return setting.kind is int and setting.name.endswith(("_bytes", "_size"))


def _size(value: int) -> str:
    if value >= 1 << 40 and value & (value - 1) == 0:
        return f"2^{value.bit_length() - 1}"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale and value % scale == 0:
            return f"{value // scale} {unit}"
    return str(value)


def _value(setting: Setting, value) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_bytes(setting) and value >= 1024 and value % 1024 == 0:
        return f"`{value}` ({_size(value)})"
    return f"`{value}`"


def _range(setting: Setting) -> str:
    if setting.choices:
        return " \\| ".join(f"`{c}`" for c in setting.choices)
    if setting.minimum is None and setting.maximum is None:
        return ""
    low = "" if setting.minimum is None else _plain(setting, setting.minimum)
    high = "" if setting.maximum is None else _plain(setting, setting.maximum)
    return f"{low} .. {high}"


def _plain(setting: Setting, bound) -> str:
    if _is_bytes(setting) and bound >= 1024 and int(bound) % 1024 == 0:
        return _size(int(bound))
    return str(bound)


def _help(text: str) -> str:
    for old, new in _OLD_NAMES.items():
        text = re.sub(rf"(?<![\w/.]){re.escape(old)}", new, text)
    return _cell(text)


def setting_rows(settings=SETTINGS) -> list[tuple[str, str]]:
    """(key, markdown row) per setting; key is the setting's name."""
    rows = []
    for s in settings:
        flag = "--" + s.name.replace("_", "-")
        rows.append((s.name, f"| `{s.name}` | {s.kind.__name__} | {_value(s, s.default)} "
                             f"| `BOOKIE_{s.name.upper()}` | `{flag}` | {_range(s)} "
                             f"| {_help(s.help)} |"))
    return rows


def bk_conf_rows(keys=bkconf_keys) -> list[tuple[str, str]]:
    """(key, markdown row) per BookKeeper key: mapped, special, as ours, refused, ignored."""
    rows = [(m.key, "mapped", f"`{m.setting}`: {m.unit}") for m in keys.MAPPED]
    rows += [(key, "mapped or checked", text) for key, text in keys.SPECIAL.items()]
    rows += [(key, "ignored or refused",
              f"{' or '.join(f'`{v}`' for v in values)}: ignored (as here); other values: "
              f"refused. {why}") for key, (values, why) in keys.AS_OURS.items()]
    for kind, groups in (("refused", keys.REFUSED_GROUPS), ("ignored", keys.IGNORED_GROUPS)):
        rows += [(key, kind, why) for why, group in groups.items() for key in group]
    return [(key, f"| `{key}` | {kind} | {_cell(text)} |") for key, kind, text in rows]


def bk_metric_rows(names=NAMES) -> list[tuple[str, str]]:
    """(name, markdown row) per BookKeeper metric name, in the table's order."""
    rows = []
    for n in names.values():
        here = "exported" if n.exported else "no: " + _cell(n.reason)
        ours = ", ".join(f"`{o}`" for o in n.ours.split(", ")) if n.ours else ""
        rows.append((n.name, f"| `{n.name}` | {n.type} | {n.labels} | {here} | {_cell(ours)} |"))
    return rows


HEADERS = {
    "endpoints": ["| method | path | summary | statuses | admin |",
                  "|---|---|---|---|---|"],
    "settings": ["| setting | type | default | environment | flag | range | meaning |",
                 "|---|---|---|---|---|---|---|"],
    "bk-server-conf": ["| BookKeeper key | class | here |", "|---|---|---|"],
    "bk-metric-names": ["| BookKeeper's name | type | labels | here | ours beside it |",
                        "|---|---|---|---|---|"],
}
ROWS = {"endpoints": endpoint_rows, "settings": setting_rows, "bk-server-conf": bk_conf_rows,
        "bk-metric-names": bk_metric_rows}
DOCS = {"endpoints": DOC, "settings": DOC, "bk-server-conf": OPERATIONS,
        "bk-metric-names": OPERATIONS}


def render(name: str) -> str:
    """The text that belongs between the markers of table ``name``."""
    return "\n".join(HEADERS[name] + [row for _, row in ROWS[name]()]) + "\n"


def _markers(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- BEGIN GENERATED: {name} -->\n)(.*?)(<!-- END GENERATED: {name} -->)",
                      re.S)


def current(text: str, name: str) -> str:
    """The text between the markers of table ``name``; ValueError if they are missing."""
    match = _markers(name).search(text)
    if match is None:
        raise ValueError(f"{DOCS[name].relative_to(ROOT)}: no <!-- BEGIN/END GENERATED: "
                         f"{name} --> markers")
    return match.group(2)


def regenerate(text: str, doc: pathlib.Path = DOC) -> str:
    """The doc with every generated table of ``doc`` replaced by a fresh rendering."""
    for name in (n for n in ROWS if DOCS[n] == doc):
        current(text, name)
        text = _markers(name).sub(lambda m, n=name: m.group(1) + render(n) + m.group(3), text)
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 with a diff when the doc is stale")
    parser.add_argument("--doc", default=None, help="a copy of docs/http-api.md to update "
                        "instead (default: every doc of DOCS)")
    args = parser.parse_args(argv)
    docs = {pathlib.Path(args.doc): DOC} if args.doc else {d: d for d in dict.fromkeys(
        DOCS.values())}
    stale = 0
    for path, doc in docs.items():
        text = path.read_text()
        fresh = regenerate(text, doc)
        if fresh == text:
            print(f"{path}: up to date")
        elif args.check:
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(keepends=True), fresh.splitlines(keepends=True),
                fromfile=f"{path} (on disk)", tofile=f"{path} (from the code)"))
            print(f"\n{path} is stale: run python scripts/gen_docs.py", file=sys.stderr)
            stale = 1
        else:
            path.write_text(fresh)
            print(f"{path}: tables regenerated")
    return stale


if __name__ == "__main__":
    sys.exit(main())
