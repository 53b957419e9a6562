"""Endpoints (v1): the declaration the generic machinery serves."""
from dashboard.kube.registry import Resource, register

from . import strategy
from .models import Endpoints

ENDPOINTS = register(Resource(
    group="", version="v1", kind="Endpoints", plural="endpoints", singular="endpoints",
    model=Endpoints, definition="io.k8s.api.core.v1.Endpoints", short_names=("ep",),
    allow_unconditional_update=True, allow_create_on_update=True,
    default=strategy.default,
    canonicalize=strategy.canonicalize,
    validate=strategy.validate,
    validate_update=strategy.validate_update,
    spec_keys=("subsets",), status_keys=(),
    typed_columns=strategy.typed_columns,
    columns=strategy.columns,
))
