"""Imported by the crash children's forkserver only (`child._PRELOAD`): what every child
would build again, built once before the forks. tiktoken's cl100k ranks take ~0.2 s;
`lance_namespace` is imported as `import_lancedb` has it imported."""

from freshness_pipeline.adapters.vectorstores.lancedb_import import defer_client
from freshness_pipeline.core.tokens import get_encoding

defer_client()
import lance_namespace  # noqa: E402,F401

get_encoding("cl100k_base")
