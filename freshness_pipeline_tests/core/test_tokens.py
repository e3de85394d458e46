from __future__ import annotations

import socket

import pytest

from freshness_pipeline.core import tokens
from freshness_pipeline.core.tokens import count_tokens, get_encoding


def test_builds_offline(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("tokens.py touched the network")

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "bogus"))
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
    assert not (tmp_path / "bogus").exists()


def test_cached() -> None:
    assert get_encoding() is get_encoding("cl100k_base")


def test_count_tokens() -> None:
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
    assert count_tokens("<|endoftext|>") > 1  # special tokens in text count as text


def test_unknown_encoding() -> None:
    with pytest.raises(ValueError, match="p50k_base"):
        get_encoding("p50k_base")


def test_corrupt_ranks_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tokens._SPECS["cl100k_base"]
    monkeypatch.setitem(tokens._SPECS, "cl100k_base", tokens._Spec("0" * 64, spec.pat_str, spec.special_tokens))
    tokens._build.cache_clear()
    try:
        with pytest.raises(ValueError, match="do not match"):
            get_encoding("cl100k_base")
    finally:
        tokens._build.cache_clear()
