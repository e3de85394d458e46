from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest

from freshness_pipeline.adapters.embedders import make_embedder
from freshness_pipeline.adapters.embedders.hashing import HashingEmbedder
from freshness_pipeline.adapters.embedders.local import LocalEmbedder
from freshness_pipeline.adapters.embedders.openai_embedder import OpenAIEmbedder
from freshness_pipeline.adapters.vectorstores import make_vector_store
from freshness_pipeline.adapters.vectorstores.lancedb_store import LanceDBStore
from freshness_pipeline.config import ConfigError, EmbedderConfig, VectorStoreConfig
from freshness_pipeline_tests.standins.openai_standin import OpenAIStandIn

KEY = "sk-standin-test-key"
MODEL = "text-embedding-3-small"


# --- hashing ---------------------------------------------------------------------------


def test_hashing_is_deterministic_normalized_and_counted() -> None:
    texts = ["Install the CLI with pip.", "", "Configure the API key", "Install the CLI with pip."]
    a, b = HashingEmbedder(), HashingEmbedder()

    first = a.embed(texts)
    assert first.shape == (4, 256) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(first, b.embed(texts))
    assert np.array_equal(first[0], first[3])
    assert a.model == "hashing-v1-256"
    a.embed(texts[:2])
    assert (a.calls, a.texts_embedded) == (2, 6)
    assert a.embed([]).shape == (0, 256)


def test_hashing_puts_texts_sharing_words_closer() -> None:
    e = HashingEmbedder(512)
    base, near, far = e.embed(
        [
            "rotate the api key in the dashboard settings",
            "rotate your api key from the dashboard",
            "tomatoes grow best in warm sunny gardens",
        ]
    )
    assert base @ near > base @ far
    assert e.embed(["Hello, WORLD"])[0] @ e.embed(["hello world"])[0] == pytest.approx(1.0)


def test_hashing_handles_a_large_batch() -> None:
    words = [f"w{i}" for i in range(5_000)]
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, 300)) for _ in range(2_000)]
    out = HashingEmbedder().embed(texts)
    assert out.shape == (2_000, 256) and not np.isnan(out).any()


# --- OpenAI, the real SDK against the stand-in -------------------------------------------


@pytest.fixture
def standin() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn(api_key=KEY, retry_after=1.0, hang_s=3.0) as server:
        yield server


def _embedder(standin: OpenAIStandIn, **kwargs: Any) -> OpenAIEmbedder:
    return OpenAIEmbedder(api_key=KEY, base_url=standin.base_url, **kwargs)


def test_openai_returns_the_service_vectors_in_order(standin: OpenAIStandIn) -> None:
    texts = [f"section {i} about configuration" for i in range(5)]
    e = _embedder(standin)

    out = e.embed(texts)

    expected = np.stack([OpenAIStandIn.vector(MODEL, t) for t in texts])
    assert out.shape == (5, 1536) and np.allclose(out, expected, atol=1e-6)
    body = standin.requests[0].json()
    assert body["encoding_format"] == "base64" and "dimensions" not in body
    assert (e.calls, e.texts_embedded, standin.inputs_embedded) == (1, 5, 5)


def test_openai_dimensions_are_sent_only_when_set(standin: OpenAIStandIn) -> None:
    e = _embedder(standin, dimensions=256)
    out = e.embed(["short vectors"])
    assert out.shape == (1, 256) and e.dimensions == 256
    assert standin.requests[0].json()["dimensions"] == 256
    assert np.allclose(out[0], OpenAIStandIn.vector(MODEL, "short vectors", 256), atol=1e-6)


def test_openai_batches_by_input_count(standin: OpenAIStandIn) -> None:
    _embedder(standin, max_batch_inputs=3).embed([f"text {i}" for i in range(10)])
    assert [n for n, _ in standin.batches] == [3, 3, 3, 1]


def test_openai_batches_by_tokens(standin: OpenAIStandIn) -> None:
    texts = [" ".join(["token"] * 40)] * 7  # 40 tokens each
    out = _embedder(standin, max_batch_tokens=100).embed(texts)
    assert standin.batches == [(2, 80)] * 3 + [(1, 40)]
    assert out.shape == (7, 1536)


def test_openai_stays_under_the_service_token_cap(standin: OpenAIStandIn) -> None:
    texts = [f"{i} " + "hello " * 7_900 for i in range(40)]  # ~316k tokens in all
    with pytest.raises(openai.BadRequestError, match="max 300000 tokens per request"):
        openai.OpenAI(api_key=KEY, base_url=standin.base_url).embeddings.create(model=MODEL, input=texts)
    _embedder(standin).embed(texts)
    assert len(standin.batches) == 2 and max(t for _, t in standin.batches) <= 300_000


def test_openai_over_long_input_is_an_error_not_truncated(standin: OpenAIStandIn) -> None:
    with pytest.raises(ValueError, match=r"input 1 has \d+ tokens, over the 8191"):
        _embedder(standin).embed(["fine", "word " * 9_000])
    assert standin.requests == []


def test_openai_honours_retry_after(standin: OpenAIStandIn) -> None:
    standin.faults.append(("embeddings", 429))
    started = time.monotonic()
    out = _embedder(standin).embed(["rate limited once"])
    assert time.monotonic() - started >= 1.0
    assert len(standin.requests) == 2 and out.shape == (1, 1536)


def test_openai_retries_5xx_and_timeouts(standin: OpenAIStandIn) -> None:
    standin.faults.extend([("embeddings", 500), ("embeddings", "hang")])
    out = _embedder(standin, timeout=0.5).embed(["flaky service"])
    assert len(standin.requests) == 3 and out.shape == (1, 1536)


def test_openai_standin_enforces_input_limits(standin: OpenAIStandIn) -> None:
    client = openai.OpenAI(api_key=KEY, base_url=standin.base_url, max_retries=0)
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model=MODEL, input=["x"] * 2049)
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.embeddings.create(model=MODEL, input=["word " * 9_000])
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        client.embeddings.create(model="text-embedding-ada-002", input=["x"], dimensions=8)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(api_key="wrong", base_url=standin.base_url).embeddings.create(model=MODEL, input=["x"])
    floats = client.embeddings.create(model=MODEL, input=["x"], encoding_format="float")
    assert np.allclose(floats.data[0].embedding, OpenAIStandIn.vector(MODEL, "x"), atol=1e-6)


# --- local model -------------------------------------------------------------------------


@pytest.mark.slow
def test_local_model_puts_related_sentences_closer() -> None:
    e = LocalEmbedder()
    cat, kitten, taxes = e.embed(
        [
            "The cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
            "Quarterly tax returns are due at the end of April.",
        ]
    )
    assert e.dimensions == 384 and cat.shape == (384,)
    assert np.linalg.norm(cat) == pytest.approx(1.0, abs=1e-5)
    assert cat @ kitten > cat @ taxes + 0.3
    assert (e.calls, e.texts_embedded) == (1, 3)


def test_local_model_builds_and_embeds_without_torch(tmp_path: Path) -> None:
    # In a fresh process where torch, transformers and sentence-transformers cannot be
    # imported (as in the default install): nothing loads before the first text, then the
    # default backend builds its ONNX graph from the weights and embeds.
    probe = (
        "import sys\n"
        "class NoTorch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in {'torch', 'transformers', 'sentence_transformers'}:\n"
        "            raise ImportError(f'{name} is not installed')\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "from freshness_pipeline.adapters.embedders import local\n"
        "e = local.LocalEmbedder()\n"
        "assert e.embed([]).shape == (0, 384) and not e.loaded\n"
        "assert e.embed(['a query']).shape == (1, 384) and e.loaded\n"
        "assert not {'torch', 'sentence_transformers', 'transformers'} & set(sys.modules)\n"
        "try:\n"
        "    local.LocalEmbedder(backend='torch').embed(['x'])\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    env = {**os.environ, "FRESHNESS_MODEL_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pip install 'freshness_pipeline[torch]'" in done.stdout
    assert sorted(f.name for f in tmp_path.rglob("*.onnx")) == ["model.int8-per-channel.onnx", "model.onnx"]
    with pytest.raises(ValueError, match="no local copy"):
        LocalEmbedder("some-other-model")


def test_token_batches_sort_by_length_and_keep_to_the_budget() -> None:
    from freshness_pipeline.adapters.embedders.local import token_batches

    lengths = [5, 200, 12, 12, 256, 40, 7, 300, 9]
    batches = token_batches(lengths, budget=64, max_rows=3)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(lengths, reverse=True)  # longest first: each batch pads to its first
    for b in batches:
        assert len(b) == 1 or len(b) * lengths[b[0]] <= 64  # one text longer than the budget goes alone
        assert len(b) <= 3
    assert [len(b) for b in batches] == [1, 1, 1, 1, 3, 2]
    assert token_batches([], 64, 3) == []


def test_a_pipeline_call_keeps_every_session_busy() -> None:
    from freshness_pipeline.adapters.embedders.local import TOKEN_BUDGET, call_budget, token_batches

    # 64 sections of 80 wordpieces (the embedder's default call): in TOKEN_BUDGET batches
    # that is one of 51 texts and one of 13, so one session would do most of it alone.
    lengths = [80] * 64
    assert [len(b) for b in token_batches(lengths, TOKEN_BUDGET, 64)] == [51, 13]
    batches = token_batches(lengths, call_budget(lengths, sessions=2), 64)
    assert [len(b) for b in batches] == [16, 16, 16, 16]
    long = [256] * 200  # a large call keeps the full budget
    assert call_budget(long, sessions=2) == TOKEN_BUDGET
    assert token_batches([7], call_budget([7], sessions=2), 64) == [[0]]  # a query: one batch


# --- factories ---------------------------------------------------------------------------


def test_make_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert make_embedder(EmbedderConfig(provider="hashing", dimensions=64)).dimensions == 64
    assert isinstance(make_embedder(EmbedderConfig()), LocalEmbedder)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        make_embedder(EmbedderConfig(provider="openai"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    e = make_embedder(EmbedderConfig(provider="openai", model="text-embedding-3-large"))
    assert (e.model, e.dimensions) == ("text-embedding-3-large", 3072)


def test_make_vector_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PINECONE_API_KEY", raising=False)
    store = make_vector_store(VectorStoreConfig(), default_path=tmp_path / "v")
    assert isinstance(store, LanceDBStore) and store.path == tmp_path / "v"
    with pytest.raises(ConfigError, match="vector_store.host"):
        make_vector_store(VectorStoreConfig(provider="pinecone"), default_path=tmp_path)
    with pytest.raises(ConfigError, match="PINECONE_API_KEY"):
        make_vector_store(
            VectorStoreConfig(provider="pinecone", host="http://127.0.0.1:9"),
            default_path=tmp_path,
        )


# --- local backends (torch, ONNX, ONNX int8) -----------------------------------------------

SENTENCES = [
    "The cat is sleeping on the sofa.",
    "A kitten naps on the couch.",
    "Quarterly tax returns are due at the end of April.",
    "Set `retry_limit` to change how many times an upload is retried after a network error.",
]


LONG = " ".join(f"word{i} of a long section that the model's 256-wordpiece window cuts" for i in range(60))


@pytest.mark.slow
def test_onnx_backends_agree_with_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ONNX graph built from the weights without torch gives the reference model's
    vectors (sentence-transformers on torch): cosine >= 0.9999 in fp32, in one batch of
    mixed lengths (padding) and past the window (truncation)."""
    pytest.importorskip(
        "sentence_transformers",
        reason="the [torch] extra is not installed: pip install -e '.[torch]' (in the dev extra) to compare with torch",
    )
    monkeypatch.setenv("FRESHNESS_MODEL_CACHE", str(tmp_path))
    texts = [*SENTENCES, LONG, "ok"]
    torch_vecs = LocalEmbedder(backend="torch").embed(texts)
    onnx = LocalEmbedder(backend="onnx")
    int8 = LocalEmbedder(backend="onnx-int8")
    assert (onnx.model, int8.model) == ("all-MiniLM-L6-v2+onnx", "all-MiniLM-L6-v2+onnx-int8")
    fp32_vecs, int8_vecs = onnx.embed(texts), int8.embed(texts)
    assert np.sum(fp32_vecs * torch_vecs, axis=1).min() >= 0.9999
    # int8 is close, not equal: its activations are quantized per batch, which costs a
    # two-wordpiece text batched with a 256-wordpiece one the most.
    int8_cos = np.sum(int8_vecs * torch_vecs, axis=1)
    assert int8_cos[: len(SENTENCES)].min() > 0.98 and int8_cos.min() > 0.95
    assert np.linalg.norm(int8_vecs, axis=1) == pytest.approx(np.ones(len(texts)), abs=1e-5)
    cat, kitten, taxes = int8_vecs[:3]
    assert cat @ kitten > cat @ taxes + 0.3


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_onnx_vectors_do_not_depend_on_the_batch(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Padding is masked out: a text's fp32 vector is the same alone and in a batch with
    longer texts (and batches split by the token budget); an int8 one is exactly the same
    (its activations' scale is the text's own), so a refreshed index equals a fresh one."""
    monkeypatch.setenv("FRESHNESS_MODEL_CACHE", str(tmp_path))
    e = LocalEmbedder(backend=backend, batch_size=2)
    texts = [*SENTENCES, LONG, "ok"]
    together = e.embed(texts)
    alone = np.vstack([e.embed([t]) for t in texts])
    if backend == "onnx-int8":
        assert np.array_equal(together, alone)
    assert np.sum(together * alone, axis=1).min() > 0.99999


def test_onnx_files_are_built_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from freshness_pipeline.adapters.embedders.onnx_model import model_file
    from freshness_pipeline.adapters.embedders.shipped import model_path

    monkeypatch.setenv("FRESHNESS_MODEL_CACHE", str(tmp_path))
    path = model_path("all-MiniLM-L6-v2")
    int8_file = model_file(path, "onnx-int8")
    files = sorted(tmp_path.rglob("*.onnx"))
    assert [f.name for f in files] == ["model.int8-per-channel.onnx", "model.onnx"] and int8_file in files
    stamps = [f.stat().st_mtime_ns for f in files]
    assert model_file(path, "onnx-int8") == int8_file and model_file(path, "onnx") in files
    assert [f.stat().st_mtime_ns for f in files] == stamps
    assert not [f for f in tmp_path.rglob("*") if f.name.endswith(".tmp")]


def test_the_int8_build_prints_no_third_party_warning_and_leaves_logging_as_it_was(tmp_path: Path) -> None:
    """In a fresh process with no logging configured (as `freshness demo` builds it on a new
    machine): onnxruntime's pre-processing is done, so its quantizer warns of nothing, and
    the root logger it configures is put back, so no later log line prints twice."""
    probe = (
        "import logging\n"
        "from freshness_pipeline.adapters.embedders.onnx_model import model_file\n"
        "from freshness_pipeline.adapters.embedders.shipped import model_path\n"
        "print(model_file(model_path('all-MiniLM-L6-v2'), 'onnx-int8'))\n"
        "print(len(logging.getLogger().handlers), logging.getLevelName(logging.getLogger().level))\n"
    )
    env = {**os.environ, "FRESHNESS_MODEL_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr and "pre-processing" not in done.stderr, done.stderr
    built, root = done.stdout.strip().splitlines()
    assert Path(built).is_file()
    assert root == "0 WARNING"  # no handler, the default level: as before the build
    assert sorted(f.name for f in tmp_path.rglob("*.onnx")) == ["model.int8-per-channel.onnx", "model.onnx"]


def test_backend_is_part_of_the_model_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from freshness_pipeline.config import Settings
    from freshness_pipeline.core.embedding_models import DEFAULT_BACKEND, resolve_local
    from freshness_pipeline.pipeline.context import versions_for

    def model(**embedder: str) -> str:
        settings = Settings(sources=[{"name": "s", "sitemap": "http://127.0.0.1:9/s.xml"}], embedder=embedder)
        return versions_for(settings, settings.sources[0]).model

    assert model() == f"all-MiniLM-L6-v2+{DEFAULT_BACKEND}" == make_embedder(EmbedderConfig()).model
    assert model(backend="torch") == "all-MiniLM-L6-v2" == make_embedder(EmbedderConfig(backend="torch")).model
    assert model(backend="onnx") == "all-MiniLM-L6-v2+onnx"
    # The active index's model id (as search reads it) carries its own backend.
    assert resolve_local("all-MiniLM-L6-v2+onnx", "torch") == ("all-MiniLM-L6-v2", "onnx")
    assert make_embedder(EmbedderConfig(model="all-MiniLM-L6-v2+onnx")).model == "all-MiniLM-L6-v2+onnx"
    with pytest.raises(ValueError, match="unknown local backend"):
        LocalEmbedder(backend="tensorrt")
    with pytest.raises(ValueError, match="backend is a setting of provider local"):
        EmbedderConfig(provider="hashing", backend="onnx")


def test_two_processes_exporting_at_once_both_get_the_model(tmp_path: Path) -> None:
    """Two test or Celery workers on a new machine ask for the int8 model together: one
    quantizes while the other waits for it (the quantizer's side files beside its input made
    the second fail with FileNotFoundError), and the second finds it made."""
    import shutil

    from freshness_pipeline.adapters.embedders.onnx_model import model_file
    from freshness_pipeline.adapters.embedders.shipped import model_path

    path = model_path("all-MiniLM-L6-v2")
    fp32 = model_file(path, "onnx")  # built once, in the usual cache
    seeded = tmp_path / fp32.relative_to(fp32.parents[2])
    seeded.parent.mkdir(parents=True)
    shutil.copy(fp32, seeded)
    probe = (
        "import sys; from freshness_pipeline.adapters.embedders.local import model_path; "
        "from freshness_pipeline.adapters.embedders.onnx_model import model_file; "
        "print(model_file(model_path('all-MiniLM-L6-v2'), 'onnx-int8'))"
    )
    env = {**os.environ, "FRESHNESS_MODEL_CACHE": str(tmp_path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", probe], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    made = {out.strip() for out, _ in outs}
    assert made == {str(seeded.parent / "model.int8-per-channel.onnx")}
    assert sorted(f.name for f in seeded.parent.iterdir() if not f.name.startswith(".")) == [
        "model.int8-per-channel.onnx",
        "model.onnx",
    ]
