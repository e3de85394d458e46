"""The four assets, one partition per source: fetch -> sections -> plan -> index. Each is
one call into `freshness_pipeline.pipeline` plus the metadata Dagster plots; what a stage
hands the next (a small report through the IO manager, the bulk staged in the state store)
is in docs/dagster.md and docs/production.md. The normalizer, chunker and embedding-model
versions are the assets' `code_version`s, so the UI marks what a version bump made out of
date."""

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg

from ..adapters.state.commit import StalePlan
from ..adapters.state.staging import StagingGone
from ..config import ConfigError, Settings, load_settings
from ..core.noise import NORMALIZER_VERSION
from ..core.quarantine import Release
from ..core.segment import CHUNKER_VERSION
from ..core.tables import PAGES_IN_ERROR, TOP_PAGES
from ..core.tiers import TIERS
from ..pipeline import run_record
from ..pipeline.context import versions_for
from ..pipeline.crawl import CrawlReport, crawl
from ..pipeline.indexing import IndexReport, apply_plan
from ..pipeline.planning import PlanReport, stage_plan
from ..pipeline.sections import SectionsReport, stage_sections
from .checks import (
    CHANGE_SPIKE,
    FLAGGED_PAGES,
    PAGES_NOT_CHECKED,
    RECONCILE_CLEAN,
    SOURCE_FRESH_KEY,
    STALE_SHARE,
    change_spike,
    flagged_pages,
    pages_not_checked,
    reconcile_clean,
    stale_share,
)
from .executors import CELERY_QUEUE_TAG, EMBEDDINGS_QUEUE, executor_tags
from .heartbeats import beating
from .metadata import ROW_COUNT, URI, index_uri, owners, table
from .partitions import sources_partitions
from .resources import FreshnessResource
from .step_endings import refuse_commit_if_run_ended, results_on_failure
from .tags import ALLOW_SPIKE_TAG, RELEASE_TAG, TIER_TAG

GROUP = "freshness"
# vector_index's pool (the provider's rate limit): its limit is set on the instance (docs/deploy.md)
EMBEDDINGS_POOL = "embeddings"
REVIEW_SHOWN = 50  # pages per kind in the metadata

log = logging.getLogger(__name__)
_warned: set[str] = set()


def settings_at_load() -> Settings | None:
    """The sources file as the code location loads; a missing or invalid file, or one with
    no source, gives None and says (once) what vector_index falls back to."""
    try:
        settings = load_settings()
        problem = None if settings.sources else "the sources file lists no source"
    except ConfigError as exc:
        settings, problem = None, str(exc)
    if problem is None:
        return settings
    if problem not in _warned:
        _warned.add(problem)
        log.warning(f"vector_index: code_version model-unknown, kinds lancedb, owners team:freshness: {problem}")
    return None


def model_code_version(settings: Settings | None) -> str:
    """The embedding model and dimensions the sources file selects; `model-unknown` without one."""
    if settings is None:
        return "model-unknown"
    v = versions_for(settings, settings.sources[0])  # the embedder is shared by all sources
    return f"{v.model}/{v.dims}"


def store_kinds(settings: Settings | None) -> set[str]:
    """The configured vector store, as the asset's kind (the default, lancedb, without a file)."""
    return {settings.vector_store.provider if settings else "lancedb"}


# The decorator values below come from one read of the sources file when the code location
# loads (each read validates the whole file); metrics_assets.py reuses it.
SETTINGS_AT_LOAD = settings_at_load()


def freshness_asset(stage: str, **kwargs: Any) -> Any:
    """`dg.asset` for a stage of the pipeline: partitioned by source, in the `freshness` group,
    owned as the sources file says, tagged with the pipeline and the stage."""
    return dg.asset(
        partitions_def=sources_partitions,
        group_name=GROUP,
        owners=owners(SETTINGS_AT_LOAD),
        tags={"pipeline": "freshness", "stage": stage},
        **kwargs,
    )


@contextmanager
def _one_line_failure() -> Iterator[None]:
    """A step whose input names staged work that is gone, or a plan made before another
    commit, fails with the error's one line (what to run instead) and is not retried."""
    try:
        yield
    except (StagingGone, StalePlan) as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from exc


@freshness_asset(
    "fetch",
    kinds={"python", "http"},
    code_version="fetch-1",
    check_specs=[FLAGGED_PAGES, PAGES_NOT_CHECKED],
    description="Every page of the source fetched (conditionally) and extracted to text. "
    "A run tagged `freshness/tier` fetches only that tier's pages (and new ones). Brings the state "
    "database to the newest schema first.",
)
@results_on_failure
@beating(migrate=True)  # the run's first stage: the later ones (and their checks) only check the schema
def fetched_pages(
    context: dg.AssetExecutionContext, freshness: FreshnessResource
) -> Iterator[dg.Output[CrawlReport] | dg.AssetCheckResult]:
    tier, run_id = context.run.tags.get(TIER_TAG), context.run.run_id
    with freshness.open(context.partition_key) as ctx:
        run_record.started(ctx.store, run_id, ctx.name, tier)
        ctx.require_keys()
        release = Release.parse(context.run.tags.get(RELEASE_TAG))
        report = crawl(ctx, run_id=run_id, tier=tier, release=release)
        run_record.crawled(ctx.store, run_id, report)
    for warning in report.warnings:
        context.log.warning(f"{report.source}: {warning}")
    context.log.info(
        f"{report.source}: crawled {report.crawled} pages "
        f"({', '.join(f'{k} {v}' for k, v in sorted(report.outcomes.items()))})"
    )
    yield dg.Output(
        report,
        metadata={
            "crawled": report.crawled,
            "changed_pages": report.changed_pages,
            "new_pages": report.new_pages,
            "gone": len(report.gone),
            "errors": len(report.errors),
            "skipped": len(report.skipped),
            "flagged": len(report.flagged),
            **{k: n for k, n in report.page_counts().items() if k in ("held", "dead_links")},
            "seconds": round(report.seconds, 3),
            "tier": report.tier or "all",
            **{f"pages_{t}": report.tiers.get(t, 0) for t in TIERS},
            "errors_by_page": table(sorted(report.errors.items())[:50], PAGES_IN_ERROR),
            "skipped_by_page": table(sorted(report.skipped.items())[:50], PAGES_IN_ERROR),
            "warnings": dg.MetadataValue.json(report.warnings),
            # The pages an operator should look at (the CLI prints them from here).
            "pages_to_review": dg.MetadataValue.json(
                {kind: dict(sorted(pages.items())[:REVIEW_SHOWN]) for kind, pages in report.pages_to_review().items()}
            ),
        },
    )
    yield flagged_pages(report)
    yield pages_not_checked(report)


@freshness_asset(
    "sections",
    kinds={"python"},
    code_version=f"normalizer-{NORMALIZER_VERSION}+chunker-{CHUNKER_VERSION}",
    description="Sections (URL + heading path keys) of every page whose text may have changed, "
    "staged for diff_plan (the manifest itself changes only in vector_index's commit).",
)
@results_on_failure
@beating()
def section_manifest(
    context: dg.AssetExecutionContext, freshness: FreshnessResource, fetched_pages: CrawlReport
) -> Iterator[dg.Output[SectionsReport]]:
    with freshness.open(context.partition_key) as ctx, _one_line_failure():
        out = stage_sections(ctx, fetched_pages)  # the pages as that crawl staged them
        run_record.sectioned(ctx.store, context.run.run_id, ctx.name, out.warnings, out.errors)
    if out.reindex_reason:
        context.log.warning(f"{out.source}: full re-index: {out.reindex_reason}")
    for warning in out.warnings:
        context.log.warning(f"{out.source}: {warning}")
    yield dg.Output(
        out,
        metadata={
            "live_pages": out.live_pages,
            "resegmented_pages": out.resegmented_pages,
            "sections": out.sections,
            "gone_pages": out.gone_pages,
            "segmentation_errors": len(out.errors),
            # Pages whose text could not be segmented: the CLI prints them with the crawl's errors.
            "pages_in_error": dg.MetadataValue.json(dict(sorted(out.errors.items())[:REVIEW_SHOWN])),
            **({"reindex_reason": out.reindex_reason} if out.reindex_reason else {}),
            "seconds": round(out.seconds, 3),
            "warnings": dg.MetadataValue.json(out.warnings),
        },
    )


@freshness_asset(
    "plan",
    kinds={"python"},
    code_version="plan-1",
    check_specs=[STALE_SHARE, CHANGE_SPIKE],
    description="New / changed / moved / unchanged / removed sections against the manifest. "
    "A failed `change_spike` fails this step after the plan is stored, and vector_index does not run.",
)
@results_on_failure
@beating()
def diff_plan(
    context: dg.AssetExecutionContext, freshness: FreshnessResource, section_manifest: SectionsReport
) -> Iterator[dg.Output[PlanReport] | dg.AssetCheckResult]:
    allow = context.run.tags.get(ALLOW_SPIKE_TAG, "").lower() == "true"
    with freshness.open(context.partition_key) as ctx, _one_line_failure():
        plan = stage_plan(ctx, section_manifest)
        checks = [stale_share(plan, ctx.source.checks), change_spike(ctx, plan, allowed=allow)]
    for f in plan.fuzzy:
        context.log.info(
            f"fuzzy unchanged {f.id} ({f.url}, distance {f.distance}): "
            f"-{' '.join(f.removed_words)} +{' '.join(f.added_words)}"
        )
    yield dg.Output(
        plan,
        metadata={
            **{f"sections_{k}": v for k, v in plan.counts.items()},
            "stale_share": round(plan.stale_share, 4),
            "change_share": round(plan.change_share, 4),
            "indexed_before": plan.indexed_before,
            "seconds": round(plan.seconds, 3),
            "top_changed_pages": table(plan.top_pages(), TOP_PAGES),
        },
    )
    yield from checks


@freshness_asset(
    "index",
    kinds=store_kinds(SETTINGS_AT_LOAD),
    code_version=f"index-1+{model_code_version(SETTINGS_AT_LOAD)}",
    pool=EMBEDDINGS_POOL,
    op_tags={CELERY_QUEUE_TAG: EMBEDDINGS_QUEUE},  # under the celery executor: the embedding workers
    check_specs=[RECONCILE_CLEAN],
    description="The vector index: embed the queue, upsert, delete, then commit the manifest. "
    "Does not run when diff_plan's blocking change-spike check fails. Its freshness is judged per "
    "source by the source_fresh check; reconcile_clean compares it with the manifest after the commit.",
)
@results_on_failure
@beating()
def vector_index(
    context: dg.AssetExecutionContext, freshness: FreshnessResource, diff_plan: PlanReport
) -> Iterator[dg.Output[IndexReport] | dg.AssetCheckResult]:
    run_id = context.run.run_id
    with freshness.open(context.partition_key) as ctx:
        allow = context.run.tags.get(ALLOW_SPIKE_TAG, "").lower() == "true"
        run_record.indexing(ctx.store, run_id, ctx.name)
        with _one_line_failure():
            report = apply_plan(
                ctx,
                diff_plan,
                run_id=run_id,
                spike_override=allow,
                before_commit=lambda: refuse_commit_if_run_ended(context),
            )
        run_record.indexed(ctx.store, run_id, ctx.name, report.counts["seconds"])
        context.log.info(f"{report.source}: {report.line()}")
        yield dg.Output(
            report,
            metadata={
                **report.counts,
                "stale_share": round(diff_plan.stale_share, 4),
                "change_share": round(diff_plan.change_share, 4),
                "run_start_to_searchable_s": _seconds_since_run_start(context),
                "namespace": report.namespace,
                **({"reindex_reason": report.reindex_reason} if report.reindex_reason else {}),
                "top_changed_pages": table(diff_plan.top_pages(), TOP_PAGES),
                # the source's sections indexed, after the commit
                ROW_COUNT: dg.MetadataValue.int(ctx.store.manifest.count(ctx.name)),
                URI: dg.MetadataValue.text(index_uri(ctx.settings, report.namespace)),
            },
        )
        yield reconcile_clean(ctx)  # the stores as the commit left them, in this step


def _seconds_since_run_start(context: dg.AssetExecutionContext) -> float:
    """From the start of the run whose crawl saw the change to the change being searchable."""
    record = context.instance.get_run_record_by_id(context.run.run_id)
    started = record.start_time if record else None
    return round(time.time() - started, 3) if started else 0.0


refresh_assets = [fetched_pages, section_manifest, diff_plan, vector_index]
# The four assets, their checks, and whatever is derived from the index
# (freshness_metrics), in the same run.
# (source_fresh, judged between runs by its own job, is not a step of it.)
refresh_selection = dg.AssetSelection.assets(*refresh_assets).downstream() - dg.AssetSelection.checks(SOURCE_FRESH_KEY)
refresh_job = dg.define_asset_job(
    "refresh",
    selection=refresh_selection,
    description="Refresh one source (a `sources` partition): fetch, sections, plan, index, commit, "
    "then its freshness metrics, with every asset check. Tagged `freshness/tier` it fetches that "
    "tier's pages only; `freshness/allow-spike=true` lets a reviewed change spike through; "
    "`freshness/release=all` (or kind names, page URLs) takes the pages the quarantine holds.",
    tags=executor_tags(),
)


def is_refresh(run: dg.DagsterRun) -> bool:
    """A run of the refresh job, or one materializing its assets (the UI's, a backfill's); not
    a run of checks only (`source_fresh`'s)."""
    return run.job_name == refresh_job.name or any(a.key in (run.asset_selection or ()) for a in refresh_assets)
