"""freshness_pipeline: keep a RAG index true to the documentation site it was built from.

The public surface is `open_index` (in `api.py`): open the index kept in a home folder for
a sources file, then `refresh`, `search`, `resolve` and `status` it. Everything else is
the pipeline's own and may change. The names here are loaded on first use, so importing
any part of the package (a code location, a run worker) costs nothing extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import Hit, HomeNotFound, Index, open_index
    from .config import ConfigError

__all__ = ["ConfigError", "HomeNotFound", "Hit", "Index", "__version__", "open_index"]

DISTRIBUTION = "freshness_pipeline"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(DISTRIBUTION)
        except PackageNotFoundError:  # a source tree on sys.path, not installed
            return "0+unknown"
    if name in ("HomeNotFound", "Hit", "Index", "open_index", "ConfigError"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
