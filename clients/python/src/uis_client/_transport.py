"""Running a ``Call``: headers (bearer, Idempotency-Key, actor), typed errors, and the retry rule: a 503 with
Retry-After (or a connection refused) is retried after the time the service asked for, within ``max_retry_wait``
seconds in total. Mutations always carry an operation id, so a retried mutation runs at most once."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from ._calls import Call
from .errors import ConnectionFailedError, UisError, error_from_response

T = TypeVar("T")


@dataclass(frozen=True)
class Settings:
    base_url: str
    admin_token: str | None = None
    serving_token: str | None = None
    actor: str | None = None
    timeout: float = 60.0
    max_retries: int = 3
    max_retry_wait: float = 60.0


def request_args(settings: Settings, call: Call[Any], operation_id: str | None) -> dict[str, Any]:
    headers: dict[str, str] = dict(call.headers)
    token = settings.admin_token if call.admin else (settings.serving_token or settings.admin_token)
    if token:
        headers["authorization"] = f"Bearer {token}"
    if call.mutation:
        headers["idempotency-key"] = operation_id or str(uuid.uuid4())
    if settings.actor and call.admin:
        headers["x-uis-actor"] = settings.actor
    args: dict[str, Any] = {"method": call.method, "url": call.path, "headers": headers, "params": call.params}
    if call.body is not None:
        args["json"] = call.body
    if call.timeout is not None:
        args["timeout"] = httpx.Timeout(settings.timeout, read=call.timeout)
    return args


def _delay(call: Call[Any], error: UisError, attempt: int, waited: float, settings: Settings) -> float | None:
    """Seconds to wait before trying again, or None to raise now."""
    if not call.retry or attempt >= settings.max_retries:
        return None
    if isinstance(error, ConnectionFailedError):
        delay = min(0.25 * 2**attempt, 5.0)
    elif error.status == 503 and error.retry_after is not None:
        delay = error.retry_after
    else:
        return None
    return delay if waited + delay <= settings.max_retry_wait else None


def _parse(call: Call[T], response: httpx.Response) -> T:
    if response.status_code >= 400:
        raise error_from_response(response)
    return call.parse(response.json())


def _unreachable(e: httpx.TransportError, settings: Settings) -> UisError:
    return ConnectionFailedError(
        "service_unreachable", f"{settings.base_url}: {type(e).__name__}: {e}", status=0
    )


def run_sync(http: httpx.Client, settings: Settings, call: Call[T], operation_id: str | None = None) -> T:
    args = request_args(settings, call, operation_id)
    attempt, waited = 0, 0.0
    while True:
        try:
            return _parse(call, http.request(**args))
        except UisError as e:
            error = e
        except httpx.ConnectError as e:
            error = _unreachable(e, settings)
        delay = _delay(call, error, attempt, waited, settings)
        if delay is None:
            raise error
        time.sleep(delay)
        attempt, waited = attempt + 1, waited + delay


async def run_async(
    http: httpx.AsyncClient, settings: Settings, call: Call[T], operation_id: str | None = None
) -> T:
    args = request_args(settings, call, operation_id)
    attempt, waited = 0, 0.0
    while True:
        try:
            return _parse(call, await http.request(**args))
        except UisError as e:
            error = e
        except httpx.ConnectError as e:
            error = _unreachable(e, settings)
        delay = _delay(call, error, attempt, waited, settings)
        if delay is None:
            raise error
        await asyncio.sleep(delay)
        attempt, waited = attempt + 1, waited + delay
