"""Relax's affinity rule (``packages/routing/src/affinity-hash.ts``): a keyed request goes to the eligible replica with
the largest SHA-256 digest, compared as bytes, of ``json.dumps([role, model_id, key, engine_id],
separators=(",", ":"))``; the first replica in discovery order wins a tie (``max``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence


def affinity_digest(role: str, model_id: str, key: str, engine_id: str) -> bytes:
    message = json.dumps([role, model_id, key, engine_id], separators=(",", ":"))
    return hashlib.sha256(message.encode()).digest()


def relax_affinity_pick(role: str, model_id: str, key: str, engine_ids: Sequence[str]) -> int:
    """Index of the winner in ``engine_ids`` (not empty)."""
    return max(range(len(engine_ids)), key=lambda i: affinity_digest(role, model_id, key, engine_ids[i]))
