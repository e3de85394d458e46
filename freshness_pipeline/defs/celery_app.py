"""The Celery app of the workers: `dagster-celery worker start -A freshness_pipeline.defs.celery_app`.

dagster-celery's own `dagster_celery.app` reads its broker from a YAML file (`-y`); this one
reads the environment through `executors.celery_settings`, as the runs do, so a worker and
the runs it serves cannot disagree on the broker, the result backend or the acknowledgement.
"""

from dagster_celery.executor import CeleryExecutor
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from .executors import celery_settings

app = make_app(CeleryExecutor.for_cli(**celery_settings()).app_args())
execute_plan = create_task(app)
