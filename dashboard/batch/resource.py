"""Job (batch/v1): the declaration the generic machinery serves."""
from dashboard.kube.registry import Resource, register

from . import strategy
from .models import Job

JOBS = register(Resource(
    group="batch", version="v1", kind="Job", plural="jobs", singular="job",
    model=Job, definition="io.k8s.api.batch.v1.Job", categories=("all",),
    has_status=True, has_generation=True, allow_unconditional_update=True,
    default=strategy.default,
    prepare_for_create=strategy.prepare_for_create,
    validate=strategy.validate,
    validate_update=strategy.validate_update,
    validate_status_update=strategy.validate_status_update,
    field_getters=strategy.field_getters,
    typed_columns=strategy.typed_columns,
    columns=strategy.columns,
))
