"""The one routing function: resolve the model, then select a replica (``route`` of ``@uis/routing``)."""

from __future__ import annotations

from collections.abc import Collection

from ..errors import UisError
from .request_keys import RequestKeys
from .resolve import ResolvedModel, resolve_model
from .selector import ReplicaSelector, Selection


def route(
    snapshot: object,
    keys: RequestKeys,
    selector: ReplicaSelector,
    exclude: Collection[str] = (),
) -> tuple[ResolvedModel, Selection] | UisError:
    model = resolve_model(snapshot, keys.model, keys.route_key)
    if isinstance(model, UisError):
        return model
    selection = selector.select(model, keys.affinity_key, keys.min_weight_version, exclude, keys.session_key)
    if isinstance(selection, UisError):
        return selection
    return model, selection
