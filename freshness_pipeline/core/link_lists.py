"""The lists of a page's main text that hold links, written as markdown by us, not by trafilatura.

trafilatura deletes a list, or a block around one, whose text is mostly links, or mostly
short links, as boilerplate: a Sphinx toctree, a "see also" list, release notes ("Fix X.
#123 by @user"). Whether it does depends on the text around the list (its size limits
differ for the last element of a block), so the same list would come and go with a "Last
updated" line. Once a page is cut down to its `<main>`, navigation is gone and a list is
content: each outermost list holding a link is swapped for a placeholder paragraph before
trafilatura runs (`lift`), and the placeholder for the list's markdown after (`restore`).
A list in an `<aside>`, `<nav>`, `<header>` or `<footer>` (a "Related pages" box, other on
every request) is left to trafilatura's judgement, and a list in a block that trafilatura
drops for other reasons (a share bar) goes with its placeholder.
"""

from __future__ import annotations

import re

from lxml.html import Element, HtmlElement

__all__ = ["lift", "restore"]

_TOKEN = "FreshnessLinkList"  # placeholder words: `{_TOKEN}{n}x`
_LISTS = ("ul", "ol")
_CHROME = frozenset({"aside", "nav", "header", "footer"})
_SKIP = frozenset({"script", "style", "template", "noscript", "button", "svg", "img"})
_CODE = frozenset({"code", "kbd", "samp", "tt"})
_EMPHASIS = {"em": "*", "i": "*", "strong": "**", "b": "**"}
# What markdown would read as syntax in plain text (trafilatura escapes the same; the
# `escapes` noise rule drops those a block renders the same without).
_INLINE_SPECIAL = re.compile(r"([\\`*_~\[\]<])")
_BLOCK_START = re.compile(r"^(#{1,6}(?=\s|$)|>|[-+](?=\s|$)|\d{1,9}(?=[.)](?:\s|$)))")
_SPACE = re.compile(r"\s+")


def lift(root: HtmlElement) -> dict[str, str]:
    """Swap every outermost list under `root` holding a link (bar chrome) for a placeholder paragraph;
    placeholder -> the list's markdown. Nothing is lifted from a page whose text holds the
    placeholder word already."""
    if _TOKEN in (root.text_content() or ""):
        return {}
    lifted: dict[str, str] = {}
    for lst in list(root.iter(*_LISTS)):
        if _in_list_or_chrome(lst) or lst.find(".//a[@href]") is None or lst.getparent() is None:
            continue
        token = f"{_TOKEN}{len(lifted)}x"
        try:
            lifted[token] = "\n".join(_list_lines(lst))
        except RecursionError:  # nested past Python's stack: trafilatura judges it
            continue
        placeholder = Element("p")
        placeholder.text, placeholder.tail = token, lst.tail
        lst.getparent().replace(lst, placeholder)
    return lifted


def restore(markdown: str, lifted: dict[str, str]) -> str:
    """`markdown` with each placeholder that came through replaced by its list, a block of its own."""
    if not lifted:
        return markdown
    pattern = re.compile(r"\n*[ \t]*\b(" + "|".join(map(re.escape, lifted)) + r")\b[ \t]*\n*")
    return pattern.sub(lambda m: f"\n\n{lifted[m.group(1)]}\n\n", markdown).strip("\n")


def _in_list_or_chrome(el: HtmlElement) -> bool:
    return any(a.tag in _LISTS or a.tag in _CHROME for a in el.iterancestors())


def _list_lines(lst: HtmlElement, indent: str = "") -> list[str]:
    lines: list[str] = []
    number = _start(lst)
    for item in lst:
        if not isinstance(item.tag, str) or item.tag != "li":
            continue
        marker = f"{number}. " if lst.tag == "ol" else "- "
        number += 1
        blocks = _item_blocks(item, indent + " " * len(marker))
        if not blocks or not blocks[0] or blocks[0][0].startswith(" "):
            blocks.insert(0, [""])
        first, *rest = blocks
        lines.append((indent + marker + first[0]).rstrip())
        lines += first[1:]
        for block in rest:
            lines += block
    return lines


def _start(lst: HtmlElement) -> int:
    try:
        return int(lst.get("start", "1"))
    except ValueError:
        return 1


def _item_blocks(item: HtmlElement, indent: str) -> list[list[str]]:
    """An item's content as blocks of lines: its text runs (the first without indent),
    its nested lists and code blocks (indented under the item)."""
    blocks: list[list[str]] = []
    run: list[str] = [_escaped(item.text)]

    def flush() -> None:
        text = _SPACE.sub(" ", "".join(run)).strip()
        if text:
            blocks.append([_BLOCK_START.sub(r"\\\1", text) if not blocks else indent + _BLOCK_START.sub(r"\\\1", text)])
        run.clear()

    for child in item:
        if isinstance(child.tag, str) and child.tag in _LISTS:
            flush()
            blocks.append(_list_lines(child, indent))
        elif isinstance(child.tag, str) and child.tag == "pre":
            flush()
            blocks.append(_fenced(child.text_content(), indent))
        else:
            run.append(_inline(child))
            continue
        run.append(_escaped(child.tail))
    flush()
    return blocks


def _inline(el: HtmlElement) -> str:
    """An element's text as inline markdown, then its tail."""
    tail = _escaped(el.tail)
    tag = el.tag if isinstance(el.tag, str) else ""
    if tag in _SKIP or not tag:
        return tail
    if tag in _CODE:
        return _code_span(el.text_content()) + tail
    if tag == "br":
        return " " + tail
    inner = _escaped(el.text) + "".join(_inline(c) for c in el)
    if tag in ("ul", "ol", "pre"):  # a list or code block inside an inline element: its text
        inner = " " + _SPACE.sub(" ", el.text_content()) + " "
    if tag == "a" and el.get("href") and inner.strip():
        return f"[{inner.strip()}]({_target(el.get('href', ''))})" + tail
    if tag in _EMPHASIS and inner.strip():
        mark = _EMPHASIS[tag]
        return f"{mark}{inner.strip()}{mark}" + tail
    if tag in ("p", "div", "section", "dd", "dt", "li", "table", "tr", "td", "th", "blockquote"):
        return f" {inner} " + tail
    return inner + tail


def _escaped(text: str | None) -> str:
    return _INLINE_SPECIAL.sub(r"\\\1", text) if text else ""


def _code_span(text: str) -> str:
    text = _SPACE.sub(" ", text).strip()
    if not text:
        return ""
    ticks = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _target(href: str) -> str:
    href = href.strip()
    if any(c in href for c in " <>()"):
        return "<" + href.replace("\\", "\\\\").replace("<", "\\<").replace(">", "\\>") + ">"
    return href


def _fenced(code: str, indent: str) -> list[str]:
    fence = "`" * max(3, max((len(r) + 1 for r in re.findall(r"`{3,}", code)), default=3))
    body = code.strip("\n").split("\n")
    return [indent + fence, *(indent + line if line else "" for line in body), indent + fence]
