"""docs/http-api.md's and docs/operations.md's generated tables equal what the code says.

The endpoint table comes from ``api/openapi.py``'s spec, the settings table from
``bookie/config.py``'s ``SETTINGS``, the bk_server.conf table (docs/operations.md) from
``bookie/bkconf_keys.py``, all rendered by ``scripts/gen_docs.py`` (the same
functions this test calls). A setting or endpoint added without its row, a row left for one
removed, or a row whose text no longer matches fails here, naming the rows; the fix is
``python scripts/gen_docs.py``. The doc's error table is checked against the error classes.
Every ``docs/X.md §N`` a file cites names a section X has, and every link between docs, or
from README.md into them, resolves to a file and a heading.
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


@pytest.mark.parametrize("name", ["endpoints", "settings", "bk-server-conf",
                                  "bk-metric-names"])
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


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _sections(text: str) -> dict[str, str]:
    """A doc's numbered sections (``## 5. Runbooks`` -> ``5``, ``### 5.7 ...`` -> ``5.7``),
    each with its text up to the next heading of any level."""
    found: dict[str, str] = {}
    parts = re.split(r"^#{2,3} ", text, flags=re.MULTILINE)[1:]
    for part in parts:
        number = re.match(r"(\d+[a-z]?(?:\.\d+)?)[. ]", part)
        if number:
            found[number.group(1)] = part
    return found


def _has_section(text: str, number: str) -> bool:
    """§N or §N.M is a heading, or M is a numbered item (``M.`` or ``**N.M``) of §N."""
    sections = _sections(text)
    if number in sections:
        return True
    top, _, item = number.partition(".")
    body = sections.get(top)
    return bool(item and body and re.search(
        rf"^(\s*{item}\. |\*\*{top}\.{item} )", body, re.MULTILINE))


#: ``docs/X.md §N``, ``docs/X.md §N, §M``, ``docs/X.md §N-§M``, ``[X.md](X.md) §N`` ...
CITATION = re.compile(r"(?:docs/|\]\()([\w-]+\.md)\)? ((?:§\d+[a-z]?(?:\.\d+)?"
                      r"(?:(?:, | and |-|/)§\d+[a-z]?(?:\.\d+)?)*))")


def test_every_cited_docs_section_exists():
    """A docstring, comment or doc that cites ``docs/X.md §N`` names a section X has."""
    docs = {path.name: path.read_text() for path in DOCS.glob("*.md")}
    missing = []
    for name, text in _tracked_text_files():
        if not name.endswith((".py", ".md", ".toml")):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for match in CITATION.finditer(line):
                doc = match.group(1)
                if doc not in docs:
                    continue  # README.md and the like: not a numbered doc
                for number in re.findall(r"§(\d+[a-z]?(?:\.\d+)?)", match.group(2)):
                    if not _has_section(docs[doc], number):
                        missing.append(f"{name}:{n}: {doc} §{number}")
    assert missing == [], "cited sections that do not exist:\n" + "\n".join(missing)


def test_every_link_into_the_docs_resolves():
    """Markdown links between docs (``[§5.7](#57-...)``, ``[x](admin-api.md#...)``), and
    from README.md into them (``[x](docs/x.md)``), name a file that exists and, with an
    anchor, a heading it has."""
    broken = []
    for path in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                if "://" in target:
                    continue
                file, _, anchor = target.partition("#")
                doc = path.parent / file if file else path
                if not doc.is_file():
                    broken.append(f"{path.name}:{n}: {target}")
                    continue
                headings = re.findall(r"^#+ (.+)$", doc.read_text(), re.MULTILINE)
                if anchor and anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{path.name}:{n}: {target}")
    assert broken == [], "links that resolve to nothing:\n" + "\n".join(broken)
