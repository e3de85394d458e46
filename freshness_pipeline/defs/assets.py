"""The four assets, one partition per source: fetch -> sections -> plan -> index.

Each asset is one call into `freshness_pipeline.pipeline` plus the metadata Dagster plots.
Their outputs (reports and plans, not page bodies) go through the IO manager; the pages,
the manifest and the vectors live in the state store and the vector store.
"""


import dagster as dg

from ..core.noise import NORMALIZER_VERSION
from ..core.segment import CHUNKER_VERSION
from ..pipeline.crawl import CrawlReport, crawl
from ..pipeline.indexing import IndexReport, apply_plan
from ..pipeline.planning import StagedPlan, make_plan
from ..pipeline.sections import SectionSet, current_sections
from .partitions import sources_partitions
from .resources import FreshnessResource

GROUP = "freshness"
TIER_TAG = "freshness/tier"


def _md_table(rows: list[tuple[str, object]], headers: tuple[str, str]) -> dg.MarkdownMetadataValue:
    lines = [f"| {headers[0]} | {headers[1]} |", "| --- | --- |"]
    lines += [f"| {a} | {b} |" for a, b in rows] or ["| (none) | |"]
    return dg.MetadataValue.md("\n".join(lines))


@dg.asset(
    partitions_def=sources_partitions,
    group_name=GROUP,
    kinds={"python", "http"},
    code_version="fetch-1",
    description="Every page of the source fetched (conditionally) and extracted to text.",
)
def fetched_pages(context: dg.AssetExecutionContext, freshness: FreshnessResource) -> dg.Output[CrawlReport]:
    tier = context.run.tags.get(TIER_TAG)
    with freshness.open(context.partition_key) as ctx:
        report = crawl(ctx, tier=tier)
    context.log.info(
        f"{report.source}: crawled {report.crawled} pages "
        f"({', '.join(f'{k} {v}' for k, v in sorted(report.outcomes.items()))})"
    )
    return dg.Output(
        report,
        metadata={
            "crawled": report.crawled,
            "changed_pages": report.changed_pages,
            "new_pages": report.new_pages,
            "gone": len(report.gone),
            "errors": len(report.errors),
            "flagged": len(report.flagged),
            "seconds": round(report.seconds, 3),
            "tier": report.tier or "all",
            "errors_by_page": _md_table(sorted(report.errors.items())[:50], ("page", "reason")),
        },
    )


@dg.asset(
    partitions_def=sources_partitions,
    group_name=GROUP,
    kinds={"python"},
    code_version=f"{NORMALIZER_VERSION}+{CHUNKER_VERSION}",
    description="Sections (URL + heading path keys) of every page whose text may have changed.",
)
def section_manifest(
    context: dg.AssetExecutionContext, freshness: FreshnessResource, fetched_pages: CrawlReport
) -> dg.Output[SectionSet]:
    with freshness.open(context.partition_key) as ctx:
        out = current_sections(ctx, fetched_pages)
    if out.reindex_reason:
        context.log.warning(f"{out.source}: full re-index: {out.reindex_reason}")
    return dg.Output(
        out,
        metadata={
            "live_pages": out.live_pages,
            "resegmented_pages": len([s for s in out.signatures.values() if s]),
            "sections": len(out.sections),
            "gone_pages": len(out.gone),
            "segmentation_errors": len(out.errors),
            "reindex_reason": out.reindex_reason or "",
            "seconds": round(out.seconds, 3),
        },
    )


@dg.asset(
    partitions_def=sources_partitions,
    group_name=GROUP,
    kinds={"python"},
    code_version="plan-1",
    description="New / changed / moved / unchanged / removed sections against the manifest.",
)
def diff_plan(
    context: dg.AssetExecutionContext, freshness: FreshnessResource, section_manifest: SectionSet
) -> dg.Output[StagedPlan]:
    with freshness.open(context.partition_key) as ctx:
        staged = make_plan(ctx, section_manifest)
    for f in staged.plan.fuzzy:
        context.log.info(
            f"fuzzy unchanged {f.id} ({f.url}, distance {f.distance}): "
            f"-{' '.join(f.removed_words)} +{' '.join(f.added_words)}"
        )
    return dg.Output(
        staged,
        metadata={
            **{f"sections_{k}": v for k, v in staged.counts.items()},
            "stale_share": round(staged.stale_share, 4),
            "change_share": round(staged.change_share, 4),
            "indexed_before": staged.indexed_before,
            "seconds": round(staged.seconds, 3),
            "top_changed_pages": _md_table(staged.top_pages(), ("page", "sections written")),
        },
    )


@dg.asset(
    partitions_def=sources_partitions,
    group_name=GROUP,
    kinds={"lancedb", "pinecone"},
    code_version="index-1",
    description="The vector index: embed the queue, upsert, delete, then commit the manifest.",
)
def vector_index(
    context: dg.AssetExecutionContext, freshness: FreshnessResource, diff_plan: StagedPlan
) -> dg.Output[IndexReport]:
    with freshness.open(context.partition_key) as ctx:
        report = apply_plan(ctx, diff_plan, run_id=context.run_id)
    context.log.info(f"{report.source}: {report.line()}")
    return dg.Output(
        report,
        metadata={**report.counts, "namespace": report.namespace, "reindex_reason": report.reindex_reason or ""},
    )


refresh_assets = [fetched_pages, section_manifest, diff_plan, vector_index]
refresh_job = dg.define_asset_job(
    "refresh", selection=dg.AssetSelection.assets(*refresh_assets), partitions_def=sources_partitions
)
