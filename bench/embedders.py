"""Local embedding backends side by side: `python -m bench.embedders [--site DIR ...]`.

For torch fp32, ONNX fp32 and ONNX int8 (`adapters/embedders/local.py`) on the sections of
real docs pages (markdown folders, e.g. `../shared/corpora/httpx/r9`; default: the demo
site shipped in the package), prints:

  load_s      first `embed` of one text: model load (and, once per cache, the ONNX build)
  texts/s     sections embedded per second, `--batch` texts per call as the pipeline does, after the load
  tokens/s    their wordpieces per second (as the model reads them: at most 256 each)
  x torch     texts/s over torch's, in the same run
  cos mean    mean cosine between the backend's vector and torch's, per section
  cos min     the worst section
  hit@5       a retrieval set made from the pages: each section's first sentence as the
              query, that section expected in the top 5 of all sections by cosine

The ONNX files are built into a fresh cache folder unless `--cache` names one. torch (the
reference) needs the [torch] extra; without it the ONNX backends are measured alone. The
load average is printed with the figures: on a shared machine they are only comparable
within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from freshness_pipeline.adapters.embedders.local import LocalEmbedder
from freshness_pipeline.adapters.embedders.shipped import model_path, window
from freshness_pipeline.core.embedding_models import LOCAL_BACKENDS as BACKENDS
from freshness_pipeline.core.segment import segment

DEMO_SITE = Path(__file__).resolve().parent.parent / "freshness_pipeline" / "demo" / "site" / "v2"
_SENTENCE = re.compile(r"(?<=[.!?])\s")
_MARKUP = re.compile(r"[`*#>|\[\]()]|https?://\S+")


def sections(folders: list[Path], limit: int) -> list[str]:
    texts: list[str] = []
    for folder in folders:
        for page in sorted(folder.rglob("*.md")):
            url = f"https://docs.example/{page.relative_to(folder).with_suffix('')}"
            texts += [s.embed_text for s in segment(url, page.read_text(errors="replace"), budget=200)]
    return texts[:limit]


def queries(texts: list[str]) -> list[tuple[str, int]]:
    """(first sentence of at least 6 words, index of its section)."""
    out = []
    for i, text in enumerate(texts):
        words = _MARKUP.sub(" ", _SENTENCE.split(text.strip(), maxsplit=1)[0]).split()
        if len(words) >= 6:
            out.append((" ".join(words[:25]), i))
    return out


def hit_at_5(embedder: LocalEmbedder, corpus: np.ndarray, asked: list[tuple[str, int]]) -> float:
    q = embedder.embed([text for text, _ in asked])
    top = np.argsort(-(q @ corpus.T), axis=1)[:, :5]
    return float(np.mean([want in row for (_, want), row in zip(asked, top, strict=True)]))


def wordpieces(texts: list[str]) -> int:
    from tokenizers import Tokenizer

    path = model_path("all-MiniLM-L6-v2")
    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.enable_truncation(window(path))
    return sum(len(e.ids) for e in tok.encode_batch(texts))


def measure(
    backend: str, texts: list[str], asked: list[tuple[str, int]], tokens: int, batch: int
) -> tuple[dict[str, float], np.ndarray]:
    e = LocalEmbedder(backend=backend, batch_size=batch)
    started = time.perf_counter()
    e.embed(["warm up"])
    load = time.perf_counter() - started
    started = time.perf_counter()
    # As the pipeline calls it: `embedder.batch_size` texts at a time.
    vectors = np.vstack([e.embed(texts[i : i + batch]) for i in range(0, len(texts), batch)])
    seconds = time.perf_counter() - started
    row = {
        "load_s": load,
        "texts_per_s": len(texts) / seconds,
        "tokens_per_s": tokens / seconds,
        "hit_at_5": hit_at_5(e, vectors, asked),
    }
    return row, vectors


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.embedders", description=__doc__.split("\n\n")[0])
    p.add_argument("--site", type=Path, action="append", help="folder of markdown pages (repeatable)")
    p.add_argument("--limit", type=int, default=768, help="sections embedded per backend (default 768)")
    p.add_argument("--batch", type=int, default=64, help="texts per embed call (embedder.batch_size, default 64)")
    p.add_argument("--cache", type=Path, help="ONNX cache folder (default: a fresh temporary one)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    os.environ["FRESHNESS_MODEL_CACHE"] = str(args.cache or tempfile.mkdtemp(prefix="freshness-onnx-"))
    texts = sections(args.site or [DEMO_SITE], args.limit)
    asked, tokens = queries(texts), wordpieces(texts)
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        print("no [torch] extra: torch is not measured (pip install -e '.[torch]')")
        backends = [b for b in BACKENDS if b != "torch"]
    else:
        backends = list(BACKENDS)  # torch first: the reference
    rows: dict[str, dict[str, float]] = {}
    reference: np.ndarray | None = None
    for backend in backends:
        row, vectors = measure(backend, texts, asked, tokens, args.batch)
        reference = vectors if reference is None else reference
        cos = np.sum(vectors * reference, axis=1)
        rows[backend] = {**row, "cos_mean": float(cos.mean()), "cos_min": float(cos.min())}
    base = rows[backends[0]]["texts_per_s"]
    for r in rows.values():
        r["x_first"] = r["texts_per_s"] / base
    chars = sum(map(len, texts)) / len(texts)
    load = os.getloadavg()
    if args.json:
        summary = {"sections": len(texts), "queries": len(asked), "avg_chars": chars, "tokens": tokens}
        print(json.dumps({**summary, "load": load, "backends": rows}))
        return 0
    print(
        f"{len(texts)} sections (avg {chars:.0f} chars, {tokens / len(texts):.0f} wordpieces), "
        f"{len(asked)} retrieval queries, {os.cpu_count()} cores, batches of {args.batch}, "
        f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )
    print(
        f"{'backend':<10} {'load_s':>7} {'texts/s':>8} {'tokens/s':>9} {'x ' + backends[0]:>8} "
        f"{'cos mean':>9} {'cos min':>8} {'hit@5':>6}"
    )
    for name, r in rows.items():
        print(
            f"{name:<10} {r['load_s']:>7.1f} {r['texts_per_s']:>8.1f} {r['tokens_per_s']:>9.0f} {r['x_first']:>8.2f} "
            f"{r['cos_mean']:>9.4f} {r['cos_min']:>8.4f} {r['hit_at_5']:>6.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
