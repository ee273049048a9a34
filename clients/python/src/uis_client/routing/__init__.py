"""The routing rules of ``@uis/routing`` in Python: the same decisions on the same snapshot (checked by the
shared vectors in ``packages/routing/vectors``)."""

from .affinity import affinity_digest, relax_affinity_pick
from .request_keys import (
    DEFAULT_AFFINITY_HEADER,
    MIN_WEIGHT_VERSION_HEADER,
    ROUTE_KEY_HEADER,
    RequestKeys,
    request_keys,
)
from .resolve import ResolvedModel, resolve_model
from .route import route
from .selector import Candidate, ReplicaSelector, Selection, is_eligible
from .staleness import StalenessBound, StalenessRule
from .states import retry_guidance
from .weight_version import compare_weight_versions, meets_min_weight_version

__all__ = [
    "DEFAULT_AFFINITY_HEADER",
    "MIN_WEIGHT_VERSION_HEADER",
    "ROUTE_KEY_HEADER",
    "Candidate",
    "ReplicaSelector",
    "RequestKeys",
    "ResolvedModel",
    "Selection",
    "StalenessBound",
    "StalenessRule",
    "affinity_digest",
    "compare_weight_versions",
    "is_eligible",
    "meets_min_weight_version",
    "relax_affinity_pick",
    "request_keys",
    "resolve_model",
    "retry_guidance",
    "route",
]

