"""The runs' concurrency pools, with their limits made before this command's runs race to
make them.

`vector_index` runs in the pool `embeddings` (the provider's rate limit), whose limit is
the instance's `concurrency.pools.default_limit` (docs/dagster.md). Dagster makes a pool's
limit row when a step first claims the pool, and on PostgreSQL two runs making it at once
fail one of them: the loser's insert violates the key, which aborts its transaction, and
Dagster then updates in that transaction (dagster-io/dagster#33552, open in 1.13). A
caller that makes the row before its runs start removes that race from them; a caller that
loses the same race to another command finds the row made and goes on. Dagster has no
public call for this (docs/dagster.md lists the storage methods used).
"""

from __future__ import annotations

from collections.abc import Collection

import dagster as dg
from sqlalchemy.exc import SQLAlchemyError

EMBEDDINGS_POOL = "embeddings"  # the provider's rate limit: `concurrency: pools:` in dagster.yaml


def ensure_pools(instance: dg.DagsterInstance, pools: Collection[str] = (EMBEDDINGS_POOL,)) -> None:
    """Make the limit row of each of `pools` that has none, as the instance's default
    limit sets it (none without a default, as Dagster does)."""
    storage = instance.event_log_storage
    if instance.global_op_concurrency_default_limit is None or not storage.supports_global_concurrency_limits:
        return
    for pool in set(pools) - _made(instance):
        try:
            storage.initialize_concurrency_limit_to_default(pool)
        except SQLAlchemyError:
            if pool not in _made(instance):  # not another command's row: a real failure
                raise


def _made(instance: dg.DagsterInstance) -> set[str]:
    return {limit.name for limit in instance.event_log_storage.get_pool_limits()}
