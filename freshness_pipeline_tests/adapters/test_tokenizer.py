"""The token budget follows the embedder: sections are measured with the model's own
tokenizer and cut at its window, so the model never silently truncates a section."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
from pydantic import ValidationError

from freshness_pipeline.adapters.embedders.shipped import model_path
from freshness_pipeline.adapters.embedders.tokenizer import TokenizerSpec, tokenizer_for
from freshness_pipeline.config import ChunkPolicy, EmbedderConfig
from freshness_pipeline.core.extract import extract
from freshness_pipeline.core.noise import normalize
from freshness_pipeline.core.segment import TARGET_SHARE, segment
from freshness_pipeline.demo.render import render
from freshness_pipeline.pipeline.workers import Cut, SegmentJob, segment_one
from freshness_pipeline_tests.corpus.corpora import load_revisions

URL = "https://docs.test/api"
WORDS = "proxy retry cookie header stream auth cert pool redirect encoding limit transport".split()


def test_each_provider_gets_its_tokenizer_and_window() -> None:
    chunking = ChunkPolicy()
    assert tokenizer_for(EmbedderConfig(provider="local"), chunking) == TokenizerSpec(
        "wordpiece", "all-MiniLM-L6-v2", 256
    )
    assert tokenizer_for(EmbedderConfig(provider="openai"), chunking) == TokenizerSpec("tiktoken", "cl100k_base", 400)
    assert tokenizer_for(EmbedderConfig(provider="openai"), ChunkPolicy(token_budget=2000)).budget == 512
    assert tokenizer_for(EmbedderConfig(provider="hashing"), chunking) == TokenizerSpec("tiktoken", "cl100k_base", 400)


def corpus_sections(root: Path, spec: TokenizerSpec) -> list:
    out = []
    for rel, text in load_revisions(root)[-1].docs.items():
        url = f"{URL}/{rel}"
        markdown = normalize(extract(render(text, title=rel, nav={}), url).markdown, url=url)
        out += segment(url, markdown, budget=spec.budget, count=spec.counter())
    return out


@pytest.mark.slow
def test_no_section_of_a_real_site_is_longer_than_the_local_models_window(corpora: Path) -> None:
    spec = tokenizer_for(EmbedderConfig(provider="local"), ChunkPolicy())
    sections = corpus_sections(corpora / "httpx", spec)
    os.environ["HF_HUB_OFFLINE"] = "1"
    st = pytest.importorskip(
        "sentence_transformers",
        reason="the [torch] extra is not installed: pip install -e '.[torch]' (in the dev extra) to count with it",
    )
    SentenceTransformer = st.SentenceTransformer

    model = SentenceTransformer(str(model_path("all-MiniLM-L6-v2")), local_files_only=True)
    assert model.max_seq_length == spec.budget == 256
    lengths = [len(model.tokenizer(s.embed_text)["input_ids"]) for s in sections]  # the model's own count
    assert lengths == [s.tokens for s in sections]
    assert max(lengths) <= 256
    assert sum(1 for s in sections if s.chunk_index > 0) > 10  # long sections were cut, not truncated


def test_the_target_share_travels_to_the_segment_workers_and_names_the_chunker() -> None:
    hashing = EmbedderConfig(provider="hashing")
    specs = {share: tokenizer_for(hashing, ChunkPolicy(target_share=share)) for share in (2, 3, 4)}
    assert specs[TARGET_SHARE] == tokenizer_for(hashing, ChunkPolicy())
    assert specs[TARGET_SHARE].label == "cl100k_base/400"  # the default leaves the chunker version as it is
    assert specs[4].label == "cl100k_base/400/share-4"
    assert tokenizer_for(EmbedderConfig(provider="local"), ChunkPolicy(target_share=3)).target_share == 3
    page = "# Long\n\n" + "\n\n".join(  # ~13,000 tokens: enough runs for their sizes to average out
        f"Step {i} sets the {WORDS[i % 12]} option of client {i * 7919 % 1000}, and the {WORDS[i * 5 % 12]} timeout "
        "follows it."
        for i in range(600)
    )
    chunks = {}
    for share, spec in specs.items():  # pickled, as the spawned segment workers receive it
        _, cut = segment_one(SegmentJob(URL, page, None, "Long", frozenset(), pickle.loads(pickle.dumps(spec))))
        assert isinstance(cut, Cut)
        chunks[share] = len(cut.sections)
    assert 1 < chunks[2] < chunks[3] < chunks[4]
    with pytest.raises(ValidationError, match="target_share"):
        ChunkPolicy(target_share=1)
