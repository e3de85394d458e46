"""The index says what the page says, through `freshness run` on a loopback site: release
notes' link-dense entries reach the index, a collapsible block changes no key, every
live record's citation offsets are found, a title-only page survives a quiet redeploy,
and no markdown escape reaches the text readers see."""

from __future__ import annotations

import json
import random
from pathlib import Path

from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import paragraph

HOME = paragraph(random.Random(1), 80)
RELEASE = """# Release notes

## 0.115.0

### Fixed

- Fix the retry loop. PR [#123](https://github.com/o/r/pull/123) by [@ann](https://github.com/ann).
- Drop Python 3.8. PR [#124](https://github.com/o/r/pull/124) by [@bob](https://github.com/bob).
"""
GUIDE = """# Guide

## Install

{install}

{details}

### Extras

Extras need a compiler and the headers of your system libraries.

## Configure

Configure the client in `settings.toml`:

```toml
retries = 3
```
The file is read once at start.

Install it with `pip install acme-widgets[postgres]` or pip install acme-widgets[postgres], with *emphasis*.
"""
DETAILS = "<details><summary>Technical details</summary><p>It builds a wheel first.</p></details>"
CONTACT = "# Contact us\n\n<form><input name='email'><button>Send</button></form>\n"


def site_docs(*, details: bool = False) -> dict[str, str]:
    install = f"Install the tool with pip. {paragraph(random.Random(2), 30)}"
    return {
        "index.md": f"# Home\n\n{HOME}\n",
        "release-notes.md": RELEASE,
        "guide.md": GUIDE.format(install=install, details=DETAILS if details else ""),
        "contact.md": CONTACT,
    }


def counts_of(c: dict) -> tuple[int, int, int]:
    return c["upserted"], c["deleted"], c["embedded"]


def test_the_index_says_what_the_pages_say(dagster_home: Path) -> None:
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(site_docs())
        fr.run()
        records = fr.dump()
        by_heading = {r["heading_path"]: r for r in records}

        # 31.4: short link-dense list items are content.
        fixed = by_heading["Release notes > 0.115.0 > Fixed"]["text"]
        assert "Fix the retry loop. PR [#123](https://github.com/o/r/pull/123) by [@ann]" in fixed, fixed
        assert "Drop Python 3.8." in fixed

        # 27.3: no escape markdown does not need in the payload, none in what is searched.
        configure = by_heading["Guide > Configure"]["text"]
        assert "or pip install acme-widgets[postgres], with *emphasis*." in configure, configure
        assert all("\\" not in r["text"] for r in records), [r["text"] for r in records if "\\" in r["text"]]

        # 31.6: every live record's citation offsets are found, the one after a code fence too.
        hits = json.loads(fr.cli("search", "configure the client settings file", "-k", "50", "--json"))
        assert len(hits) == len(records)
        assert [h["id"] for h in hits if h["start"] is None] == []
        (hit,) = [h for h in hits if h["heading_path"] == "Guide > Configure"]
        assert hit["end"] - hit["start"] == len(hit["text"])

        # 27.2: a page whose only text is its title is one record, found by its title.
        contact = [r for r in records if r["url"].rstrip("/").endswith("/contact")]
        assert [(r["heading_path"], r["text"]) for r in contact] == [("", "# Contact us")]

        # 27.2: a quiet redeploy adding "Last updated: <date>" to every article changes nothing.
        site.publish(site_docs(), noise=lambda path: {"updated": "December 2, 2026 10:00"})
        assert counts_of(fr.run()) == (0, 0, 0)
        assert fr.dump() == records
        site.publish(site_docs(), noise=lambda path: {"updated": "December 3, 2026 09:00"})
        assert counts_of(fr.run()) == (0, 0, 0)

        # 31.5: a collapsible block added under Install changes Install alone, no key.
        site.publish(site_docs(details=True))
        c = fr.run()
        assert counts_of(c) == (1, 0, 1), c
        after = fr.dump()
        assert {r["id"] for r in after} == {r["id"] for r in records}
        install = [r for r in after if r["heading_path"] == "Guide > Install"]
        assert ["Technical details\n\nIt builds a wheel first." in r["text"] for r in install] == [True]
        site.publish(site_docs())
        assert counts_of(fr.run()) == (1, 0, 0)  # removed again: the old text's vector is cached
