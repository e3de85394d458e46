"""The documentation against the tree: docs/architecture.md is a map of at most 200 lines
with one diagram, naming only modules that exist; every module the README and the docs name
exists, and every link of theirs leads to a file and, with an anchor, to a heading of it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
ARCHITECTURE = DOCS / "architecture.md"
# Where a path the map names may live: the repository, the package, the tests.
ROOTS = (REPO, REPO / "freshness_pipeline", REPO / "freshness_pipeline_tests")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")


def _exists(name: str) -> bool:
    """A path under one of the roots; a bare module name (`extract.py`) anywhere in the
    package, `bench/` or the tests (the map names them within their group's paragraph)."""
    if any((root / name).exists() for root in ROOTS):
        return True
    return "/" not in name.rstrip("/") and any(
        next(root.rglob(name), None) is not None for root in (*ROOTS[1:], REPO / "bench")
    )


def _anchors(doc: Path) -> set[str]:
    """The anchors of a markdown file's headings, as GitHub makes them."""
    heads = (ln.lstrip("#").strip() for ln in doc.read_text().splitlines() if ln.startswith("#"))
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


def test_the_architecture_is_a_map_of_modules_that_exist() -> None:
    text = ARCHITECTURE.read_text()
    assert len(text.splitlines()) <= 200
    assert text.count("```mermaid") == 1
    named = [n for n in CODE.findall(text) if n.endswith((".py", "/")) and not n.startswith(("[", "."))]
    assert len(named) > 50  # the module groups name their modules
    assert [n for n in named if not _exists(n)] == []


def test_every_link_of_the_docs_resolves() -> None:
    broken = []
    for doc in [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for target in LINK.findall(doc.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists() or (anchor and anchor not in _anchors(dest)):
                broken.append(f"{doc.relative_to(REPO)}: {target}")
    assert broken == []


def test_every_module_the_docs_name_exists() -> None:
    missing = []
    for doc in [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]:
        names = {n for n in CODE.findall(doc.read_text()) if n.endswith(".py") and "://" not in n}
        missing += [f"{doc.relative_to(REPO)}: {n}" for n in sorted(names) if not _exists(n)]
    assert missing == []
