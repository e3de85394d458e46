"""What the text core makes a docs history cost: `python -m bench.replay_texts`.

For each shipped corpus (`../shared/corpora`, or `$FRESHNESS_CORPORA`) and each embedder's
chunking (`local`: the default model's 256-wordpiece window; `hashing`: 400 cl100k
tokens), the clean pages of every revision go through extract -> normalize -> segment
(the corpus replay's oracle), and each revision step counts the retrieval texts never seen
before: what `freshness run` embeds with `fuzzy_threshold: 0` (the corpus replay asserts
that it embeds exactly these). A change to extraction, the noise rules or the segmenter
shows here as sections and texts gained or lost, in seconds and without Dagster.

With `--peers` (the `[peers]` extra), LangChain's `index()` with the whole site in one
batch (as in `bench/peers.py`) indexes the same pages' extracted markdown at every step,
and its characters embedded per step are printed beside ours. `--target-share N` chunks
with `chunking.target_share: N` (a long section's runs aim at budget/N). `--reindex-from M`
also prints what the re-index from target budget/M to this one embeds at the last revision
(its texts not cut the same at both targets), as a share of the last revision's characters.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.cli import add_target_share
from bench.corpora import CORPORA, clean_page, corpora_root, first_seen, load_revisions
from freshness_pipeline.adapters.embedders.tokenizer import tokenizer_for
from freshness_pipeline.config import ChunkPolicy, EmbedderConfig
from freshness_pipeline.core.extract import extract
from freshness_pipeline.core.noise import normalize
from freshness_pipeline.core.segment import TARGET_SHARE, segment
from freshness_pipeline.core.urls import normalize_url
from freshness_pipeline.demo.render import page_path

BASE = "http://127.0.0.1:1/"


def replay(corpus: str, provider: str, share: int = TARGET_SHARE) -> tuple[list[tuple[int, int, int]], dict[str, str]]:
    """(sections, new texts, their characters) per revision, r0 first; the last revision's
    retrieval texts by content hash."""
    spec = tokenizer_for(EmbedderConfig(provider=provider), ChunkPolicy(target_share=share))
    count = spec.counter()
    revisions = load_revisions(corpora_root() / corpus)
    dates = first_seen(revisions)
    pages: dict[tuple[str, str], dict[str, str]] = {}  # (path, markdown) -> hash -> retrieval text
    seen: set[str] = set()
    out = []
    for rev in revisions:
        texts: dict[str, str] = {}
        sections = 0
        for rel, source in rev.docs.items():
            if (rel, source) not in pages:
                url = normalize_url(BASE + page_path(rel))
                page = extract(clean_page(rel, source, dates[rel]), url)
                markdown = normalize(page.markdown, url=url)
                made = segment(url, markdown, budget=spec.budget, count=count, target_share=spec.target_share)
                pages[(rel, source)] = {s.content_hash: s.embed_text for s in made}
                sections += len(made)
            else:
                sections += len(pages[(rel, source)])
            texts |= pages[(rel, source)]
        new = {h: t for h, t in texts.items() if h not in seen}
        out.append((sections, len(new), sum(len(t) for t in new.values())))
        seen |= texts.keys()
    return out, texts


def langchain(corpus: str, home: Path) -> list[int]:
    """Characters LangChain's one-batch `index()` embeds per revision, r0 first."""
    from bench.peers import LangChainPeer

    peer = LangChainPeer(home, None)
    extracted: dict[tuple[str, str], tuple[str, str]] = {}  # (path, source) -> (url, markdown)
    out = []
    for rev in load_revisions(corpora_root() / corpus):
        for rel, source in rev.docs.items():
            if (rel, source) not in extracted:
                url = normalize_url(BASE + page_path(rel))
                extracted[(rel, source)] = url, extract(clean_page(rel, source), url).markdown
        pages = dict(extracted[(rel, source)] for rel, source in rev.docs.items())
        pages = {url: markdown for url, markdown in pages.items() if markdown}
        before = peer.tally.chars
        peer.step(pages)
        out.append(peer.tally.chars - before)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.replay_texts", description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", choices=CORPORA, action="append", help="default: every corpus")
    p.add_argument("--peers", action="store_true", help="LangChain one batch beside ours (the [peers] extra)")
    add_target_share(p)
    p.add_argument(
        "--reindex-from", type=int, metavar="M", help="the re-index from target budget/M, at the last revision"
    )
    args = p.parse_args(argv)
    share = args.target_share or TARGET_SHARE
    reindex: list[str] = []
    started = time.perf_counter()
    print("| corpus | chunking | sections at r9 | r0 texts / chars | r1..r9 texts / chars | chars per step r1..r9 |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for corpus in args.corpus or CORPORA:
        for provider in ("local", "hashing"):
            rows, last = replay(corpus, provider, share)
            steps = rows[1:]
            if args.reindex_from:
                old = replay(corpus, provider, args.reindex_from)[1]
                new = sum(len(t) for h, t in last.items() if h not in old)
                total = sum(len(t) for t in last.values())
                reindex.append(f"| {corpus} | {provider} | {new:,} of {total:,} | {new / total:.0%} |")
            print(
                f"| {corpus} | {provider} | {rows[-1][0]} | {rows[0][1]} / {rows[0][2]:,} "
                f"| {sum(r[1] for r in steps)} / {sum(r[2] for r in steps):,} "
                f"| {', '.join(f'{r[2]:,}' for r in steps)} |"
            )
        if args.peers:
            with tempfile.TemporaryDirectory(prefix="freshness-replay-lc-") as tmp:
                lc = langchain(corpus, Path(tmp))[1:]
            print(f"| {corpus} | LangChain one batch | | | - / {sum(lc):,} | {', '.join(f'{c:,}' for c in lc)} |")
    if reindex:
        print(f"\nre-index from budget/{args.reindex_from} to budget/{share} at the last revision:\n")
        print("| corpus | chunking | characters embedded | share |\n| --- | --- | ---: | ---: |")
        print("\n".join(reindex))
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
