"""The sources file: what to crawl, how to embed, where to write. Validated with pydantic.

sources:
  - name: docs
    sitemap: http://127.0.0.1:8000/sitemap.xml
embedder: {provider: local}
vector_store: {provider: lancedb}
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DEFAULT_SOURCES = "sources.yaml"


class ConfigError(ValueError):
    """The sources file is missing or invalid; the message names the file and the setting."""


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regex {pattern!r}: {exc}") from None
    return pattern


Regex = Annotated[str, AfterValidator(_compiles)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FetchPolicy(_Strict):
    """How to crawl one source politely and what each HTTP answer means."""

    user_agent: str = "freshness-pipeline/0.1 (+{contact})"
    contact: str = "ops@example.invalid"
    timeout_s: float = 10.0
    max_retries: int = 2  # on 5xx / 429 / timeouts, within one run
    backoff_s: float = 0.5  # base of the exponential backoff between retries
    max_retry_after_s: float = 30.0  # a longer Retry-After is not waited for: the page errors
    concurrency: int = 8  # requests in flight per host
    rate_per_s: float | None = None  # per-host request rate cap; None = no cap beyond robots
    obey_robots: bool = True
    max_redirects: int = 5
    max_bytes: int = 5_000_000
    missing_after: int = 3  # consecutive misses before a known page is declared gone
    max_gone_share: float = 0.5  # more live pages than this gone in one crawl: an outage, held
    soft_404_min_chars: int = 200  # a page that had more text and drops under this is flagged
    keep_query_params: list[str] = Field(default_factory=list)  # e.g. ["version"]
    drop_query: bool = True  # drop every other query parameter
    # Wall-clock limit of one page (all its attempts, redirects and reads): a server that
    # trickles a byte at a time costs this much at most. The run stops starting new
    # requests after `run_budget_s`; the pages left are skipped (kept), not waited for.
    page_deadline_s: float = Field(60.0, gt=0, le=3600)
    run_budget_s: float = Field(3600.0, gt=0, le=7 * 86_400)
    # Hosts this source may fetch (robots.txt, sitemaps, pages, redirect targets); default:
    # the hosts of `sitemap` and `start_urls`. `www.` is ignored.
    allowed_hosts: list[str] | None = None
    # Private, link-local and cloud-metadata addresses are refused unless this is set;
    # loopback is always allowed (tests, the demo).
    allow_private_addresses: bool = False
    # More than this share of one run's fetched pages redirecting to one URL is an outage
    # (a maintenance page): they are held as errors, even with the spike override.
    max_redirect_share: float = Field(0.5, ge=0, le=1)


class DiscoveryPolicy(_Strict):
    """Link discovery within a scope, when `start_urls` are given, and the bounds of sitemap
    discovery."""

    scope_prefix: str | None = None  # default: the start URL's directory
    include: list[Regex] = Field(default_factory=list)  # regexes on the normalized URL
    exclude: list[Regex] = Field(default_factory=list)
    max_pages: int = 10_000
    max_depth: int = 10
    max_sitemaps: int = Field(500, ge=1, le=100_000)  # sitemap files read per run, indexes included
    max_sitemap_depth: int = Field(4, ge=0, le=10)  # index levels followed below the first sitemap


class NoisePolicy(_Strict):
    """Normalization rules applied before hashing. Each named rule can be turned off."""

    disabled_rules: list[str] = Field(default_factory=list)
    repeated_block_share: float = 0.6  # a block on more than this share of pages is template
    fuzzy_threshold: int = 3  # simhash Hamming distance counted as unchanged; 0 = exact only

    @field_validator("disabled_rules")
    @classmethod
    def _known_rules(cls, names: list[str]) -> list[str]:
        from .core.noise import RULES

        unknown = sorted(set(names) - RULES.keys())
        if unknown:
            raise ValueError(f"unknown rule(s) {', '.join(unknown)}; known: {', '.join(RULES)}")
        return names


class ChunkPolicy(_Strict):
    token_budget: int = 400  # sections over this many tokens are split further
    encoding: str = "cl100k_base"


class TierRule(_Strict):
    pattern: Regex  # on the normalized URL
    tier: Literal["hot", "warm", "cold"]


class TierPolicy(_Strict):
    rules: list[TierRule] = Field(default_factory=list)
    default: Literal["hot", "warm", "cold"] = "warm"
    hot_every_h: float = 4.0
    warm_every_h: float = 24.0
    cold_every_h: float = 168.0


class CheckPolicy(_Strict):
    stale_warn: float = 0.02
    stale_error: float = 0.10
    spike_min_share: float = 0.5  # a run changing more than this share of sections ...
    spike_factor: float = 4.0  # ... and this many times its recent median is a spike
    freshness_alert: float = 0.95  # a composite freshness score under this alerts (docs/metrics.md)
    lag_target_h: float = 24.0  # embedding lag (p90) the score tolerates in full
    age_target_d: float = 730.0  # median content age the score tolerates in full
    golden_miss_runs: int = 3  # consecutive golden-set misses that request a full re-index
    golden_min_hit5: float | None = None  # a re-index under this hit@5 never becomes active


class Source(_Strict):
    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]
    sitemap: str | None = None
    start_urls: list[str] = Field(default_factory=list)
    fetch: FetchPolicy = FetchPolicy()
    discovery: DiscoveryPolicy = DiscoveryPolicy()
    noise: NoisePolicy = NoisePolicy()
    chunking: ChunkPolicy = ChunkPolicy()
    tiers: TierPolicy = TierPolicy()
    checks: CheckPolicy = CheckPolicy()
    golden_set: str | None = None  # YAML file of {query, expect} pairs; made absolute at load

    @model_validator(mode="after")
    def _has_an_entry_point(self) -> Source:
        if not self.sitemap and not self.start_urls:
            raise ValueError("needs `sitemap` or `start_urls`")
        return self


class EmbedderConfig(_Strict):
    provider: Literal["local", "openai", "hashing"] = "local"
    model: str | None = None  # default per provider
    # local: torch | onnx | onnx-int8 (default); a change re-indexes (docs/benchmarks.md)
    backend: Literal["torch", "onnx", "onnx-int8"] | None = None
    dimensions: int | None = None
    base_url: str | None = None  # OpenAI-compatible servers
    batch_size: int = 64
    max_batch_tokens: int = 250_000
    timeout_s: float = 60.0  # openai: per request; a timed-out request is retried


    @model_validator(mode="after")
    def _backend_is_local(self) -> EmbedderConfig:
        if self.backend is not None and self.provider != "local":
            raise ValueError(f"backend is a setting of provider local, not {self.provider}")
        return self


class VectorStoreConfig(_Strict):
    provider: Literal["lancedb", "pinecone"] = "lancedb"
    path: str | None = None  # lancedb: default $DAGSTER_HOME/vectors
    index_name: str | None = None  # pinecone
    host: str | None = None  # pinecone data-plane host (or a local stand-in)
    upsert_batch: int = Field(500, ge=1)  # records per upsert call of the commit protocol
    timeout_s: float = 30.0  # pinecone: per request; a timed-out request is retried


class Webhook(_Strict):
    """A receiver of change events: JSON POSTs signed with HMAC-SHA256 (docs/metrics.md)."""

    url: str
    secret_env: str  # name of the environment variable holding the signing secret
    timeout_s: float = 10.0
    attempts: int = 5  # tries per event within one delivery, with exponential backoff
    backoff_s: float = 1.0


class Settings(_Strict):
    sources: list[Source]
    embedder: EmbedderConfig = EmbedderConfig()
    vector_store: VectorStoreConfig = VectorStoreConfig()
    state_url: str | None = None  # SQLAlchemy URL; default sqlite under $DAGSTER_HOME
    webhooks: list[Webhook] = Field(default_factory=list)  # change-event receivers
    weak_thresholds: dict[str, float] = Field(default_factory=dict)  # model -> best cosine

    @model_validator(mode="after")
    def _unique_names(self) -> Settings:
        names = [s.name for s in self.sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate source names: {', '.join(dupes)}")
        return self

    def source(self, name: str) -> Source:
        for s in self.sources:
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.sources)
        raise ConfigError(f"unknown source {name!r}; the sources file defines: {known}")


def sources_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    return Path(explicit or os.environ.get("FRESHNESS_SOURCES") or DEFAULT_SOURCES)


def dagster_home() -> Path:
    return Path(os.environ.get("DAGSTER_HOME") or "dagster_home").resolve()


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Read and validate the sources file; every error names the file and the setting."""
    p = sources_path(path)
    try:
        raw = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{p}: sources file not found (set --sources or $FRESHNESS_SOURCES)") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from exc
    try:
        settings = Settings.model_validate(raw or {})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or '(top level)'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{p}: {problems}") from exc
    return _with_golden_paths(settings, p)


def _with_golden_paths(settings: Settings, path: Path) -> Settings:
    """Golden-set paths made absolute (relative ones are relative to the sources file's
    folder), each checked to exist now rather than after a run has committed."""
    folder = path.resolve().parent
    sources = []
    for i, src in enumerate(settings.sources):
        if src.golden_set:
            golden = folder / src.golden_set  # an absolute golden_set replaces the folder
            if not golden.is_file():
                raise ConfigError(
                    f"{path}: sources.{i}.golden_set: golden set of source {src.name!r} not found: {golden}"
                )
            src = src.model_copy(update={"golden_set": str(golden)})
        sources.append(src)
    return settings.model_copy(update={"sources": sources})


def state_url(settings: Settings) -> str:
    """The manifest database: $FRESHNESS_STATE_URL, the file's `state_url`, or SQLite."""
    url = os.environ.get("FRESHNESS_STATE_URL") or settings.state_url
    return url or f"sqlite:///{dagster_home() / 'freshness.db'}"
