from __future__ import annotations

import hashlib
import os
import socket

import pytest

from freshness_pipeline.core import tokens
from freshness_pipeline.core.tokens import get_encoding


def test_builds_offline_from_tiktokens_own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The packaged ranks land where tiktoken looks (named by the sha1 of their URL) and
    tiktoken loads them with no network."""

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("tokens.py touched the network")

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    tokens._build.cache_clear()
    try:
        enc = get_encoding("cl100k_base")
        assert enc.encode("hello world") == [15339, 1917]
        assert enc.encode("<|endoftext|>", allowed_special="all") == [100257]
        assert get_encoding("o200k_base").encode("hello world") == [24912, 2375]
    finally:
        tokens._build.cache_clear()
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    cached = tmp_path / "cache" / hashlib.sha1(url.encode()).hexdigest()
    assert hashlib.sha256(cached.read_bytes()).hexdigest().startswith("223921b7")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        hashlib.sha1(url.replace("cl100k", n).encode()).hexdigest() for n in ("cl100k", "o200k")
    )


def test_the_cache_folder_is_tiktokens_own(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The ranks go where tiktoken looks, found as it finds it; the environment is not set.
    An empty TIKTOKEN_CACHE_DIR would turn tiktoken's cache off (and download): refused."""
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setattr(tokens.tempfile, "gettempdir", lambda: str(tmp_path))
    assert tokens.cache_dir() == tmp_path / "data-gym-cache"
    assert "TIKTOKEN_CACHE_DIR" not in os.environ
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(tmp_path / "gym"))
    assert tokens.cache_dir() == tmp_path / "gym"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    with pytest.raises(ValueError, match="TIKTOKEN_CACHE_DIR is empty"):
        tokens.cache_dir()


def test_cached() -> None:
    assert get_encoding() is get_encoding("cl100k_base")


def test_unknown_encoding() -> None:
    with pytest.raises(ValueError, match="p50k_base"):
        get_encoding("p50k_base")
