"""Lease (coordination.k8s.io/v1): the declaration the generic machinery serves."""
from dashboard.kube.registry import Resource, register

from . import strategy
from .models import Lease

LEASES = register(Resource(
    group="coordination.k8s.io", version="v1", kind="Lease", plural="leases", singular="lease",
    model=Lease, definition="io.k8s.api.coordination.v1.Lease",
    allow_unconditional_update=False,  # leader election depends on compare-and-swap
    allow_create_on_update=True,       # as kube's lease strategy: a PUT of a missing Lease creates it
    default=strategy.default,
    prepare_for_create=strategy.prepare_for_create,
    prepare_for_update=strategy.prepare_for_update,
    validate=strategy.validate,
    validate_update=strategy.validate_update,
    spec_keys=("spec",), status_keys=(),
    typed_columns=strategy.typed_columns,
    columns=strategy.columns,
))
