"""Imported by the crash children's forkserver only (`child._PRELOAD`): what every child
would build again, built once before the forks. tiktoken's cl100k ranks take ~0.2 s,
`import lancedb` more."""

import lancedb  # noqa: F401

from freshness_pipeline.core.tokens import get_encoding

get_encoding("cl100k_base")
