"""Alembic environment: runs against the engine the state store hands over."""

from alembic import context

from freshness_pipeline.adapters.state.schema import metadata

engine = context.config.attributes["engine"]
with engine.begin() as connection:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    context.run_migrations()
