"""What 1 MB of text in one piece costs the crawl: `python -m bench.long_text` (`make bench-long-text`).

Three generated pages, each holding `--mb` MB of text in one shape, through the path a
crawled page takes: extraction and normalization (`pipeline/workers.extract_one`, as the
crawl's pool runs it), then segmentation and fingerprints (`segment_one`, the default
embedder's chunking: its wordpieces, 256 per chunk), then the text shape and sketch the
outage holds read:

  token   one word with no space and no `/` (minified data in a paragraph)
  line    one paragraph of words on one line
  code    one code block of short lines

Prints seconds per page for each stage. No test times this; the tests of
`core/test_long_text.py` bound the work by counting it.
"""

from __future__ import annotations

import argparse
import html
import time
from collections.abc import Callable
from typing import TypeVar

from freshness_pipeline.adapters.embedders.tokenizer import TokenizerSpec, tokenizer_for
from freshness_pipeline.config import ChunkPolicy, EmbedderConfig
from freshness_pipeline.core.responses import text_shape, text_sketch
from freshness_pipeline.pipeline.workers import ExtractJob, SegmentJob, extract_one, segment_one

URL = "https://docs.example.com/guide/long/"
T = TypeVar("T")


def pages(size: int) -> dict[str, str]:
    words = "client request response timeout pool proxy stream header cookie redirect".split()
    line = " ".join(words[i % len(words)] for i in range(size // 7))[:size]
    code = "\n".join(f"value_{i} = compute({i})" for i in range(size // 24))[:size]
    token = ("a1b2c3d4e5f6g7h8" * (size // 16 + 1))[:size]

    def page(body: str) -> str:
        return f"<html><head><title>Long</title></head><body><main><h1>Long</h1>{body}</main></body></html>"

    return {
        "token": page(f"<p>Data: {token}</p>"),
        "line": page(f"<p>{html.escape(line)}</p>"),
        "code": page(f"<pre><code>{html.escape(code)}</code></pre>"),
    }


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def measure(page: str, size: int, tokenizer: TokenizerSpec) -> tuple[float, float, float, int]:
    """Seconds to extract and normalize, to segment and fingerprint, to shape and sketch;
    and the sections made."""
    t_extract, text = timed(lambda: extract_one(ExtractJob(URL, page, ())))
    assert text.error is None and len(text.markdown) >= size, text.error
    job = SegmentJob(URL, text.markdown, None, "Long", frozenset(), tokenizer)
    t_segment, (_, cut) = timed(lambda: segment_one(job))
    assert not isinstance(cut, str), cut
    t_shape, _ = timed(lambda: (text_shape(text.markdown), text_sketch(text.markdown)))
    return t_extract, t_segment, t_shape, len(cut.sections)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=1.0, help="text per page, in MB (default 1)")
    args = parser.parse_args()
    size = int(args.mb * 1_000_000)
    tokenizer = tokenizer_for(EmbedderConfig(), ChunkPolicy())
    print(f"{args.mb:g} MB of text per page; seconds per page")
    print("shape   extract+normalize  segment+fingerprint  shape+sketch   total  sections")
    for name, page in pages(size).items():
        t_extract, t_segment, t_shape, sections = measure(page, size, tokenizer)
        total = t_extract + t_segment + t_shape
        print(f"{name:6} {t_extract:18.2f} {t_segment:20.2f} {t_shape:13.2f} {total:7.2f} {sections:9}")


if __name__ == "__main__":
    main()
