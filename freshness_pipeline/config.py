"""The sources file: what to crawl, how to embed, where to write. Validated with pydantic
when it loads: every number is finite and in its range, the embedding model is known (or
given its dimensions), and each error names the file, the setting's path and the value.

sources: [{name: docs, sitemap: http://127.0.0.1:8000/sitemap.xml}]
embedder: {provider: local}
vector_store: {provider: lancedb}
"""

from __future__ import annotations

import os
import re
from importlib.util import find_spec
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .core.cadence import Cadence
from .core.lifecycle import LifecyclePolicy
from .core.responses import ResponseRules
from .core.segment import TARGET_SHARE
from .core.spike import SpikeRule
from .core.tiers import TierRules
from .quarantine_settings import QuarantinePolicy
from .settings_errors import problem, yaml_problem
from .settings_runs import RunPolicy

DEFAULT_SOURCES = "sources.yaml"


class ConfigError(ValueError):
    """The sources file is missing or invalid; the message names the file and the setting."""


# The extras of pyproject.toml that a setting may need, with the modules each installs; the
# default install (the local model, LanceDB, one machine) has none of them.
EXTRAS: dict[str, tuple[str, ...]] = {
    "tiktoken": ("tiktoken", "bpe_openai"),
    "openai": ("openai", "tiktoken", "bpe_openai"),
    "pinecone": ("pinecone",),
    "celery": ("dagster_celery",),
    "pandas": ("pandas",),  # the public API's frames (frames.py)
}


def require_extra(extra: str, setting: str = "") -> None:
    """Raise, naming `setting` and the `pip install` that fixes it, when a module of `extra`
    is missing (looked up, not imported: the check costs no import). A validator leaves
    `setting` out: the error's path names it."""
    missing = [m for m in EXTRAS[extra] if find_spec(m) is None]
    if missing:
        raise ValueError(
            f"{setting + ' ' if setting else ''}needs the [{extra}] extra ({', '.join(missing)} not installed): "
            f"pip install 'freshness_pipeline[{extra}]'"
        )


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regex {pattern!r}: {exc}") from None
    return pattern


Regex = Annotated[str, AfterValidator(_compiles)]


def _http_url(url: str) -> str:
    """An absolute http(s) URL: a bare host (`docs.example.com/sitemap.xml`) would be read
    as a path and only fail at the run's first fetch, as a host outside the scope. No
    credentials: they would be sent to every page and written in logs and run records."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an absolute http(s) URL, like https://docs.example.com/sitemap.xml")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not hold credentials (user:password@): a source crawls public pages")
    return url


HttpUrl = Annotated[str, AfterValidator(_http_url)]

# Numbers as the settings take them: ints are ints (not `true`, not 2.5), floats finite
# (`allow_inf_nan=False` on the base), each in a range that means something.
Count = Annotated[int, Field(strict=True, ge=1)]  # at least one
NonNegInt = Annotated[int, Field(strict=True, ge=0)]
Seconds = Annotated[float, Field(strict=True, gt=0, le=86_400.0)]  # a timeout or a period
Wait = Annotated[float, Field(strict=True, ge=0, le=3_600.0)]  # a backoff: 0 is no wait
Hours = Annotated[float, Field(strict=True, gt=0, le=24.0 * 366)]
EveryHours = Annotated[float, Field(strict=True, ge=0, le=24.0 * 366)]  # 0: due on every sensor tick
Share = Annotated[float, Field(strict=True, ge=0, le=1)]  # a fraction of pages, sections or queries
Small = Annotated[int, Field(strict=True, ge=0, le=20)]  # retries, redirects
Tries = Annotated[int, Field(strict=True, ge=1, le=20)]
Rate = Annotated[float, Field(strict=True, gt=0)]
Factor = Annotated[float, Field(strict=True, ge=1, le=1000)]
Days = Annotated[float, Field(strict=True, gt=0, le=36_500.0)]
Batch = Annotated[int, Field(strict=True, ge=1, le=10_000)]


def _header_value(value: str) -> str:
    """One line of printable characters: a CR or LF in a header fails every request."""
    if bad := sorted({f"U+{ord(c):04X}" for c in value if ord(c) < 0x20 or ord(c) == 0x7F}):
        raise ValueError(f"is sent in the User-Agent header and must be one line; it holds {', '.join(bad)}")
    return value


def _agent_template(template: str) -> str:
    _header_value(template)
    try:
        template.format(contact="x")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"{template!r} is not a template with only {{contact}} in braces ({exc})") from None
    return template


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class FetchPolicy(_Strict):
    """How to crawl one source politely and what each HTTP answer means."""

    user_agent: Annotated[str, AfterValidator(_agent_template)] = "freshness-pipeline/0.1 (+{contact})"
    contact: Annotated[str, Field(min_length=1), AfterValidator(_header_value)] = "ops@example.invalid"
    timeout_s: Seconds = 10.0
    max_retries: Small = 2  # on 5xx / 429 / timeouts, within one run
    backoff_s: Wait = 0.5  # base of the exponential backoff between retries
    max_retry_after_s: Wait = 30.0  # a longer Retry-After is not waited for: the page errors
    # Requests in flight per host at most; fewer while the crawl is CPU-bound (core/in_flight.py).
    concurrency: Annotated[int, Field(strict=True, ge=1, le=256)] = 8
    rate_per_s: Rate | None = None  # per-host request rate cap; None = no cap beyond robots
    obey_robots: bool = True
    max_redirects: Small = 5
    max_bytes: Count = 5_000_000
    # Crawls in a row a known page may be unlisted and unanswered before it is gone; an
    # unlisted page that still answers 200 is never gone (core/lifecycle.py).
    missing_after: Count = 3
    soft_404_min_chars: NonNegInt = 200  # a page that had more text and drops under this is flagged
    keep_query_params: list[str] = Field(default_factory=list)  # e.g. ["version"]
    drop_query: bool = True  # drop every other query parameter
    # Wall-clock limit of one page (all its attempts, redirects and reads): a server that
    # trickles a byte at a time costs this much at most. The run stops starting new
    # requests after `run_budget_s`; the pages left are skipped (kept), not waited for.
    page_deadline_s: Annotated[float, Field(strict=True, gt=0, le=3600)] = 60.0
    run_budget_s: Annotated[float, Field(strict=True, gt=0, le=7 * 86_400)] = 3600.0
    # Hosts this source may fetch (robots.txt, sitemaps, pages, redirect targets); default:
    # the hosts of `sitemap` and `start_urls`. `www.` is ignored.
    allowed_hosts: list[str] | None = None
    # Private, link-local and cloud-metadata addresses are refused unless this is set;
    # loopback is always allowed (tests, the demo).
    allow_private_addresses: bool = False
    # When a page's new answer is held instead of taken (core/quarantine.py)
    quarantine: QuarantinePolicy = QuarantinePolicy()

    def response_rules(self) -> ResponseRules:
        return ResponseRules(max_bytes=self.max_bytes, soft_404_min_chars=self.soft_404_min_chars)

    def lifecycle_rules(self) -> LifecyclePolicy:
        return LifecyclePolicy(
            missing_after=self.missing_after,
            rules=self.quarantine.rules(self.missing_after),
            soft_404_min_chars=self.soft_404_min_chars,
        )


class DiscoveryPolicy(_Strict):
    """Link discovery within a scope, when `start_urls` are given, and the bounds of sitemap
    discovery."""

    scope_prefix: str | None = None  # default: the start URL's directory
    include: list[Regex] = Field(default_factory=list)  # regexes on the normalized URL
    exclude: list[Regex] = Field(default_factory=list)
    max_pages: Count = 10_000
    max_depth: NonNegInt = 10
    max_sitemaps: Annotated[int, Field(strict=True, ge=1, le=100_000)] = (
        500  # sitemap files read per run, indexes included
    )
    max_sitemap_depth: Annotated[int, Field(strict=True, ge=0, le=10)] = (
        4  # index levels followed below the first sitemap
    )


class NoisePolicy(_Strict):
    """Normalization rules applied before hashing. Each named rule can be turned off."""

    disabled_rules: list[str] = Field(default_factory=list)
    # a block on more than this share of pages is template (0 would make every block one)
    repeated_block_share: Annotated[float, Field(strict=True, gt=0, le=1)] = 0.6
    # simhash Hamming distance (of 64 bits) counted as unchanged; 0 = exact only
    fuzzy_threshold: Annotated[int, Field(strict=True, ge=0, le=64)] = 3

    @field_validator("disabled_rules")
    @classmethod
    def _known_rules(cls, names: list[str]) -> list[str]:
        from .core.noise import RULES

        unknown = sorted(set(names) - RULES.keys())
        if unknown:
            raise ValueError(f"unknown rule(s) {', '.join(unknown)}; known: {', '.join(RULES)}")
        return names


class ChunkPolicy(_Strict):
    # sections over this many tokens are split further (8191: OpenAI's input limit)
    token_budget: Annotated[int, Field(strict=True, ge=16, le=8191)] = 400
    encoding: str = "cl100k_base"
    # a long section is cut into runs of about budget/target_share tokens (core/segment.py)
    target_share: Annotated[int, Field(strict=True, ge=2, le=8)] = TARGET_SHARE

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, name: str) -> str:
        from .core.tokens import ENCODINGS

        if name not in ENCODINGS:
            raise ValueError(f"unknown encoding {name!r}; available offline: {', '.join(ENCODINGS)}")
        return name


class TierRule(_Strict):
    pattern: Regex  # on the normalized URL
    tier: Literal["hot", "warm", "cold"]


class TierPolicy(_Strict):
    rules: list[TierRule] = Field(default_factory=list)
    default: Literal["hot", "warm", "cold"] = "warm"
    hot_every_h: EveryHours = 4.0
    warm_every_h: EveryHours = 24.0
    cold_every_h: EveryHours = 168.0

    def url_rules(self) -> TierRules:
        return TierRules(tuple((r.pattern, r.tier) for r in self.rules), self.default)

    def cadence(self) -> Cadence:
        return Cadence(self.hot_every_h, self.warm_every_h, self.cold_every_h)


class CheckPolicy(_Strict):
    stale_warn: Share = 0.02
    stale_error: Share = 0.10
    spike_min_share: Share = 0.5  # a run changing more than this share of sections ...
    spike_factor: Factor = 4.0  # ... and this many times its recent median is a spike
    freshness_alert: Share = 0.95  # a composite freshness score under this alerts (docs/metrics.md)
    lag_target_h: Hours = 24.0  # embedding lag (p90) the score tolerates in full
    age_target_d: Days = 730.0  # median content age the score tolerates in full
    golden_miss_runs: Count = 3  # consecutive golden-set misses that request a full re-index
    golden_min_hit5: Share | None = None  # a re-index under this hit@5 never becomes active

    def spike_rule(self) -> SpikeRule:
        return SpikeRule(min_share=self.spike_min_share, factor=self.spike_factor)

    @model_validator(mode="after")
    def _warn_before_error(self) -> CheckPolicy:
        if self.stale_warn > self.stale_error:
            raise ValueError(f"stale_warn ({self.stale_warn}) is above stale_error ({self.stale_error})")
        return self


class Source(_Strict):
    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]
    sitemap: HttpUrl | None = None
    start_urls: list[HttpUrl] = Field(default_factory=list)
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
    dimensions: Annotated[int, Field(strict=True, ge=1, le=65_536)] | None = None
    base_url: str | None = None  # OpenAI-compatible servers
    batch_size: Annotated[int, Field(strict=True, ge=1, le=2048)] = 64  # 2048: OpenAI's inputs per request
    max_batch_tokens: Annotated[int, Field(strict=True, ge=1)] = 250_000
    timeout_s: Seconds = 60.0  # openai: per request; a timed-out request is retried

    @model_validator(mode="after")
    def _known_model(self) -> EmbedderConfig:
        """The model and dimensions are known now, not after a crawl (`core/embedding_models.py`)."""
        from .core.embedding_models import MODELS, model_and_dims

        if self.provider == "hashing" and self.model:
            raise ValueError("model cannot be set for provider hashing (its model is hashing-v1-<dimensions>)")
        if self.provider == "local":
            local = [m for m, spec in MODELS.items() if spec.provider == "local"]
            if self.dimensions is not None:
                raise ValueError("dimensions cannot be set for provider local")
            if self.model and self.model.partition("+")[0] not in local:
                raise ValueError(f"no local copy of {self.model!r}; the local embedder ships {', '.join(local)}")
        model_and_dims(self.provider, self.model, self.dimensions)  # an unknown size raises
        return self

    @field_validator("provider")
    @classmethod
    def _installed(cls, provider: str) -> str:
        if provider != "local":  # hashing and openai count in a tiktoken encoding
            require_extra("openai" if provider == "openai" else "tiktoken")
        return provider

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
    # Records per upsert call of the commit protocol (a crash point between calls). LanceDB's
    # merge reads the whole table on each call, so small batches make a large first run
    # quadratic. Pinecone splits each call into requests of 1,000 / 2 MB itself.
    upsert_batch: Batch = 10_000
    timeout_s: Seconds = 30.0  # pinecone: per request; a timed-out request is retried
    # pinecone: records carry sparse values of their retrieval text, the full-text part of a
    # hybrid search (`core/sparse.py`); the index must use the dotproduct metric. Off: vector only.
    sparse: bool = False

    @field_validator("provider")
    @classmethod
    def _installed(cls, provider: str) -> str:
        if provider == "pinecone":
            require_extra("pinecone")
        return provider


class Webhook(_Strict):
    """A receiver of change events: JSON POSTs signed with HMAC-SHA256 (docs/metrics.md)."""

    url: str
    secret_env: str  # name of the environment variable holding the signing secret
    timeout_s: Seconds = 10.0
    attempts: Tries = 5  # tries per event within one delivery, with exponential backoff
    backoff_s: Wait = 1.0


class Settings(_Strict):
    sources: list[Source]
    runs: RunPolicy = RunPolicy()
    embedder: EmbedderConfig = EmbedderConfig()
    vector_store: VectorStoreConfig = VectorStoreConfig()
    state_url: str | None = None  # SQLAlchemy URL; default sqlite under $DAGSTER_HOME
    webhooks: list[Webhook] = Field(default_factory=list)  # change-event receivers
    # The assets' owners in the Dagster catalog: e-mail addresses or `team:<name>`
    owners: list[Annotated[str, Field(pattern=r"^(team:[\w.-]+|[^@\s]+@[^@\s]+\.[^@\s]+)$")]] = []  # pydantic copies it
    # model -> best cosine under which a search is weak; above 1 every search is
    weak_thresholds: dict[str, Annotated[float, Field(strict=True, ge=-1, allow_inf_nan=False)]] = {}
    _home: Path | None = None  # `home`: pydantic keeps it out of the file's fields

    @field_validator("sources")
    @classmethod
    def _some(cls, sources: list[Source]) -> list[Source]:
        if not sources:
            raise ValueError("the sources file lists no source; add at least one (see sources.example.yaml)")
        return sources

    @model_validator(mode="after")
    def _unique_names(self) -> Settings:
        names = [s.name for s in self.sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate source names: {', '.join(dupes)}")
        return self

    @property
    def home(self) -> Path:  # the state folder: `load_settings`' `home`, else $DAGSTER_HOME's
        return self._home or Path(os.environ.get("DAGSTER_HOME") or "dagster_home").resolve()

    def source(self, name: str) -> Source:
        for s in self.sources:
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.sources)
        raise ConfigError(f"unknown source {name!r}; the sources file defines: {known}")


def sources_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    return Path(explicit or os.environ.get("FRESHNESS_SOURCES") or DEFAULT_SOURCES)


def load_settings(path: str | os.PathLike[str] | None = None, home: str | os.PathLike[str] | None = None) -> Settings:
    """Read and validate the sources file (for the state folder `home`); errors name the file and setting."""
    p = sources_path(path)
    try:
        raw = yaml.safe_load(p.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: sources file not found (set --sources or $FRESHNESS_SOURCES)") from None
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a folder, not a sources file (point --sources at the YAML file)") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the sources file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {yaml_problem(exc)}") from exc
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(f"{p}: expected a mapping with `sources:` at the top level, got {type(raw).__name__}")
    try:
        settings = Settings.model_validate(raw or {})
    except ValidationError as exc:
        raise ConfigError(f"{p}: {'; '.join(problem(err, raw, Settings) for err in exc.errors())}") from exc
    settings._home = None if home is None else Path(home).expanduser().resolve()  # copied by model_copy
    return _with_golden_paths(settings, p)


def _with_golden_paths(settings: Settings, path: Path) -> Settings:
    """Golden-set paths made absolute (relative ones are relative to the sources file's
    folder), each checked to exist now rather than after a run has committed."""
    folder = path.resolve().parent
    sources = []
    for src in settings.sources:
        if src.golden_set:
            golden = folder / src.golden_set  # an absolute golden_set replaces the folder
            if not golden.is_file():
                raise ConfigError(f"{path}: source {src.name!r}: golden_set: file not found: {golden}")
            src = src.model_copy(update={"golden_set": str(golden)})
        sources.append(src)
    return settings.model_copy(update={"sources": sources})


def state_url(settings: Settings) -> str:
    """The manifest database: $FRESHNESS_STATE_URL, the file's `state_url`, or SQLite."""
    url = os.environ.get("FRESHNESS_STATE_URL") or settings.state_url
    return url or f"sqlite:///{settings.home / 'freshness.db'}"
