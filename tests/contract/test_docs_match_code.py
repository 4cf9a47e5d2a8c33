"""docs/http-api.md's and docs/operations.md's generated tables equal what the code says.

The endpoint table comes from ``api/openapi.py``'s spec, the settings table from
``bookie/config.py``'s ``SETTINGS``, the bk_server.conf table (docs/operations.md) from
``bookie/bkconf_keys.py``, all rendered by ``scripts/gen_docs.py`` (the same
functions this test calls). A setting or endpoint added without its row, a row left for one
removed, or a row whose text no longer matches fails here, naming the rows; the fix is
``python scripts/gen_docs.py``. The doc's error table is checked against the error classes.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess

import pytest

from bookie import errors

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


def _doc_rows(name: str) -> list[str]:
    text = gen.current(gen.DOCS[name].read_text(), name)
    return [line for line in text.splitlines()
            if line.startswith("|") and line not in gen.HEADERS[name]]


def _key(name: str, row: str) -> str:
    cells = [c.strip().strip("`") for c in re.split(r"(?<!\\)\|", row)[1:-1]]
    return f"{cells[0]} {cells[1]}" if name == "endpoints" else cells[0]


@pytest.mark.parametrize("name", ["endpoints", "settings", "bk-server-conf"])
def test_generated_table_matches_the_code(name):
    expected = dict(gen.ROWS[name]())
    documented = {_key(name, row): row for row in _doc_rows(name)}
    missing = sorted(set(expected) - set(documented))
    extra = sorted(set(documented) - set(expected))
    changed = sorted(k for k in set(expected) & set(documented) if expected[k] != documented[k])
    problems = []
    doc = gen.DOCS[name].relative_to(gen.ROOT)
    if missing:
        problems.append(f"rows missing from {doc} ({name}): {', '.join(missing)}")
    if extra:
        problems.append(f"rows in {doc} ({name}) for nothing in the code: "
                        f"{', '.join(extra)}")
    if changed:
        problems.append(f"rows of {doc} ({name}) that differ from the code: "
                        f"{', '.join(changed)}")
    assert not problems, "; ".join(problems) + ". Run: python scripts/gen_docs.py"
    assert gen.current(gen.DOCS[name].read_text(), name) == gen.render(name), (
        f"{doc} ({name}): same rows, other text or order. Run: python scripts/gen_docs.py")


def test_gen_docs_check_passes():
    assert gen.main(["--check"]) == 0, "a doc is stale: python scripts/gen_docs.py"


def test_check_names_a_setting_added_without_its_row(monkeypatch):
    from bookie.config import SETTINGS, Setting
    extra = Setting("a_new_setting", int, 1, "added without a doc row")
    monkeypatch.setattr(gen, "ROWS", {**gen.ROWS, "settings": lambda: gen.setting_rows(
        SETTINGS + (extra,))})
    documented = {_key("settings", row) for row in _doc_rows("settings")}
    assert "a_new_setting" not in documented
    assert gen.regenerate(gen.DOC.read_text()) != gen.DOC.read_text()


def test_error_table_equals_the_error_classes():
    text = (DOCS / "http-api.md").read_text()
    section = text.split("## Errors", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*(\d{3})\s*\|\s*`(E[A-Z]+)`\s*\|", section, re.MULTILINE)
    assert {(cls.status, cls.code) for cls in errors.API_ERRORS} == {
        (int(status), code) for status, code in rows}


#: The design inputs the project was first built to, which a clone does not have: the
#: project documents itself in docs/ (built from parts so that this file does not match).
OLD_REFERENCES = re.compile("(?<![\\w/.-])(" + "|".join(
    ("A" + "PI", "FOR" + "MATS", "DE" + "SIGN", "REPLI" + "CATION")) + ")\\.md|\\.\\./" + "shared")


def _tracked_text_files():
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    for name in listed.stdout.split():
        path = ROOT / name
        try:
            yield name, path.read_text()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue


def test_nothing_cites_the_old_reference_files():
    """Code, tests, scripts, deploy files, README and docs cite docs/ only, and nothing
    reads the old design inputs at run or test time."""
    found = [f"{name}:{n}: {line.strip()}" for name, text in _tracked_text_files()
             for n, line in enumerate(text.splitlines(), 1) if OLD_REFERENCES.search(line)]
    assert found == [], "old references:\n" + "\n".join(found[:30])
