"""What each indexer pays to follow a real docs history: `python -m bench.peers` (`make bench-peers`).

Every shipped corpus (`../shared/corpora`, or `$FRESHNESS_CORPORA`) is replayed revision by
revision on one loopback site (`DocsSite`, the corpus replay's renderer), and every step
is indexed by:

  ours          `freshness run` as installed: Dagster, SQLite, LanceDB and the default
                local model (all-MiniLM-L6-v2: sections cut at its 256-wordpiece window)
  ours-hashing  the same with the hashing embedder (cl100k, 400-token sections)
  lc-batch100   LangChain `index()`, SQLRecordManager, cleanup="incremental",
                MarkdownHeaderTextSplitter then RecursiveCharacterTextSplitter(2000),
                at its default batch size (100)
  lc-one-batch  the same with the whole site in one batch
  llamaindex    LlamaIndex `IngestionPipeline` (MarkdownNodeParser, SentenceSplitter)
                with a docstore and DocstoreStrategy.UPSERTS_AND_DELETE

The peers read the same pages from the same server through the same trafilatura
extraction (`core.extract`), and embed with a counting embedder. Per step: texts and
characters embedded, vectors left for gone pages (`orphans`), live pages missing from the
index (`missing`); `truth` is the number of sections whose retrieval text is new (the
oracle of the corpus replay). Needs the `[peers]` extra. llama-index-core ships its NLTK
data and tiktoken ranks in the wheel (`_static/`), so nothing is downloaded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from lxml import etree

from bench.cli import freshness
from bench.corpora import CORPORA, build_noise, clean_page, corpora_root, first_seen, load_revisions
from freshness_pipeline.adapters.embedders.tokenizer import TokenizerSpec, tokenizer_for
from freshness_pipeline.config import ChunkPolicy, EmbedderConfig
from freshness_pipeline.core.extract import extract
from freshness_pipeline.core.noise import normalize
from freshness_pipeline.core.segment import segment
from freshness_pipeline.core.urls import normalize_url
from freshness_pipeline.demo.render import page_path
from freshness_pipeline.demo.server import DocsSite

DIMS = 16


def fake_vector(text: str) -> list[float]:
    digest = hashlib.blake2b(text.encode(), digest_size=DIMS).digest()
    return [b / 255 + 0.01 for b in digest]


@dataclass
class Tally:
    texts: int = 0
    chars: int = 0

    def add(self, texts: Sequence[str]) -> None:
        self.texts += len(texts)
        self.chars += sum(len(t) for t in texts)


@dataclass
class Row:
    """One system at one step."""

    texts: int
    chars: int
    orphans: int  # vectors whose page is gone
    missing: int  # live pages with no vector


# -- the peers ---------------------------------------------------------------------------


class LangChainPeer:
    def __init__(self, home: Path, batch_size: int | None) -> None:
        from langchain_classic.indexes import SQLRecordManager
        from langchain_core.embeddings import Embeddings
        from langchain_core.vectorstores import InMemoryVectorStore
        from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

        tally = self.tally = Tally()

        class Counting(Embeddings):
            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                tally.add(texts)
                return [fake_vector(t) for t in texts]

            def embed_query(self, text: str) -> list[float]:
                return fake_vector(text)

        name = f"lc{batch_size or 'all'}"
        self.records = SQLRecordManager(name, db_url=f"sqlite:///{home / name}.db")
        self.records.create_schema()
        self.store = InMemoryVectorStore(Counting())
        self.batch_size = batch_size
        self.headers = MarkdownHeaderTextSplitter([("#", "h1"), ("##", "h2"), ("###", "h3")])
        self.splitter = RecursiveCharacterTextSplitter(chunk_size=2000)

    def step(self, pages: dict[str, str]) -> None:
        from langchain_core.indexing import index

        docs = []
        for url, markdown in sorted(pages.items()):
            parts = self.headers.split_text(markdown)
            for d in parts:
                d.metadata["source"] = url
            docs += self.splitter.split_documents(parts)
        batch = self.batch_size or max(1, len(docs))
        index(
            docs,
            self.records,
            self.store,
            cleanup="incremental",
            source_id_key="source",
            batch_size=batch,
            key_encoder="sha256",
        )

    def urls(self) -> list[str]:
        return [d["metadata"]["source"] for d in self.store.store.values()]


class LlamaIndexPeer:
    def __init__(self) -> None:
        from llama_index.core.embeddings import BaseEmbedding
        from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
        from llama_index.core.node_parser import MarkdownNodeParser, SentenceSplitter
        from llama_index.core.storage.docstore import SimpleDocumentStore
        from llama_index.core.vector_stores import SimpleVectorStore

        tally = self.tally = Tally()

        class Counting(BaseEmbedding):
            def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
                tally.add(texts)
                return [fake_vector(t) for t in texts]

            def _get_text_embedding(self, text: str) -> list[float]:
                return self._get_text_embeddings([text])[0]

            def _get_query_embedding(self, query: str) -> list[float]:
                return fake_vector(query)

            async def _aget_query_embedding(self, query: str) -> list[float]:
                return fake_vector(query)

        self.store = SimpleVectorStore()
        self.pipeline = IngestionPipeline(
            transformations=[MarkdownNodeParser(), SentenceSplitter(), Counting(model_name="counting")],
            docstore=SimpleDocumentStore(),
            vector_store=self.store,
            docstore_strategy=DocstoreStrategy.UPSERTS_AND_DELETE,
        )

    def step(self, pages: dict[str, str]) -> None:
        from llama_index.core import Document

        self.pipeline.run(documents=[Document(text=md, id_=url) for url, md in sorted(pages.items())])

    def urls(self) -> list[str]:
        return list(self.store.data.text_id_to_ref_doc_id.values())


class OursPeer:
    """`freshness run` in-process, its state in `home`; texts paid for are the embedding
    cache rows this step added, their characters those of the manifest's retrieval texts."""

    def __init__(self, home: Path, sitemap: str, provider: str) -> None:
        home.mkdir(parents=True)
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        self.sources = home / "sources.yaml"
        source = {"name": "docs", "sitemap": sitemap, "checks": {"spike_min_share": 1.0}}
        self.sources.write_text(json.dumps({"sources": [source], "embedder": {"provider": provider}}))
        self.home = home
        self.tally = Tally()

    def _cli(self, *args: str) -> str:
        return freshness(self.home, self.sources, *args)

    def step(self, pages: dict[str, str]) -> None:
        from sqlalchemy import select

        from freshness_pipeline.adapters.state import schema
        from freshness_pipeline.adapters.state.store import StateStore

        started = time.time()
        counts = json.loads(self._cli("run", "--json").strip().splitlines()[-1])
        store = StateStore(f"sqlite:///{self.home / 'freshness.db'}")
        try:
            with store.engine.connect() as conn:
                c, s = schema.embedding_cache, schema.sections
                fresh = set(conn.execute(select(c.c.content_hash).where(c.c.created_at >= started)).scalars())
                texts = {r.content_hash: r.embed_text for r in conn.execute(select(s.c.content_hash, s.c.embed_text))}
        finally:
            store.close()
        paid = [texts[h] for h in fresh if h in texts]
        if len(paid) != counts["embedded"]:
            raise RuntimeError(f"ours: {counts['embedded']} embedded but {len(paid)} new texts in the manifest")
        self.tally.add(paid)

    def urls(self) -> list[str]:
        return [json.loads(line)["url"] for line in self._cli("dump").splitlines() if line.strip()]


# -- the replay ---------------------------------------------------------------------------


def fetch_site(site: DocsSite) -> dict[str, str]:
    """Normalized URL -> extracted markdown of every page in the sitemap (pages with text)."""
    out: dict[str, str] = {}
    with httpx.Client(timeout=30) as client:
        tree = etree.fromstring(client.get(site.sitemap_url).content)
        for loc in tree.iter("{http://www.sitemaps.org/schemas/sitemap/0.9}loc"):
            url = normalize_url(loc.text or "")
            markdown = extract(client.get(loc.text or "").text, url).markdown
            if markdown.strip():
                out[url] = markdown
    return out


@dataclass
class Truth:
    """Sections whose retrieval text is new at each step, for one chunker (the oracle)."""

    spec: TokenizerSpec
    before: set[str] = field(default_factory=set)
    steps: list[int] = field(default_factory=list)

    def step(self, base_url: str, docs: dict[str, str]) -> None:
        hashes = set()
        for rel, text in docs.items():
            url = normalize_url(base_url + page_path(rel))
            markdown = normalize(extract(clean_page(rel, text), url).markdown, url=url)
            hashes |= {
                s.content_hash for s in segment(url, markdown, budget=self.spec.budget, count=self.spec.counter())
            }
        self.steps.append(len(hashes - self.before))
        self.before |= hashes


@dataclass
class Replay:
    name: str
    systems: dict[str, Any]
    truth: dict[str, Truth]  # for each of our configurations
    steps: list[str] = field(default_factory=list)
    rows: dict[str, list[Row]] = field(default_factory=dict)

    def record(self, live: Iterable[str]) -> None:
        live = set(live)
        for name, system in self.systems.items():
            before = self.rows.setdefault(name, [])
            spent = (
                system.tally.texts - sum(r.texts for r in before),
                system.tally.chars - sum(r.chars for r in before),
            )
            urls = system.urls()
            orphans = sum(1 for u in urls if u not in live)
            before.append(Row(*spent, orphans, len(live - set(urls))))


OURS = {"ours": "local", "ours-hashing": "hashing"}


def replay(name: str, home: Path, *, noise: bool, limit: int | None) -> Replay:
    revisions = load_revisions(corpora_root() / name)[: limit and limit + 1]
    dates = first_seen(revisions)
    chunking = ChunkPolicy()
    with DocsSite() as site:
        out = Replay(
            name,
            {
                **{n: OursPeer(home / n, site.sitemap_url, p) for n, p in OURS.items()},
                "lc-batch100": LangChainPeer(home, 100),
                "lc-one-batch": LangChainPeer(home, None),
                "llamaindex": LlamaIndexPeer(),
            },
            {n: Truth(tokenizer_for(EmbedderConfig(provider=p), chunking)) for n, p in OURS.items()},
        )
        for rev in revisions:
            site.publish(rev.docs, noise=build_noise(rev.number + 1, dates) if noise else _dated(dates))
            pages = fetch_site(site)
            for system in out.systems.values():
                system.step(pages)
            for truth in out.truth.values():
                truth.step(site.base_url, rev.docs)
            out.steps.append(f"r{rev.number}")
            out.record(pages)
            print(f"{name} r{rev.number}: done", file=sys.stderr)
    return out


def _dated(dates: dict[str, str]) -> Any:
    by_path = {page_path(rel): d for rel, d in dates.items()}
    return lambda path: {"date": by_path[path]}


# -- the report ---------------------------------------------------------------------------


def table(r: Replay) -> str:
    names = list(r.systems)
    head = "| step | truth | " + " | ".join(f"{n}: texts / chars / orphans / missing" for n in names) + " |"
    lines = [f"### {r.name}", "", head, "| --- | ---: |" + " ---: |" * len(names)]
    truth = r.truth["ours"].steps
    for i, step in enumerate(r.steps):
        cells = [_cell(r.rows[n][i]) for n in names]
        lines.append(f"| {step} | {truth[i]} | " + " | ".join(cells) + " |")
    steps = {n: r.rows[n][1:] for n in names}  # the revision steps, after the first index
    total = [
        _cell(Row(sum(x.texts for x in v), sum(x.chars for x in v), v[-1].orphans, v[-1].missing))
        for v in steps.values()
    ]
    lines.append(f"| r1..r{len(r.steps) - 1} | {sum(truth[1:])} | " + " | ".join(total) + " |")
    peers = {n: sum(x.chars for x in v) for n, v in steps.items() if n not in OURS}
    best = min(peers, key=peers.__getitem__)
    lines.append("")
    for n in OURS:
        chars = sum(x.chars for x in steps[n])
        over = max(0, *(x.texts - t for x, t in zip(steps[n], r.truth[n].steps[1:], strict=True)))
        lines.append(
            f"- {n}: {chars:,} characters over the steps = {chars / peers[best]:.2f} x the best peer "
            f"({best}, {peers[best]:,}; target <= 0.90); most texts over its truth in one step: {over} (target 0)"
        )
    return "\n".join(lines)


def _cell(row: Row) -> str:
    return f"{row.texts:,} / {row.chars:,} / {row.orphans} / {row.missing}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", choices=CORPORA, action="append", help="default: every shipped corpus")
    p.add_argument("--noise", action="store_true", help="serve every revision with build noise")
    p.add_argument("--steps", type=int, help="replay only the first N revision steps")
    args = p.parse_args(argv)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="freshness-peers-") as tmp:
        for name in args.corpus or CORPORA:
            home = Path(tmp) / name
            home.mkdir()
            print(table(replay(name, home, noise=args.noise, limit=args.steps)) + "\n")
    print(f"({time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
