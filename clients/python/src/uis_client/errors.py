"""Errors as the service answers them: a stable ``code``, the HTTP ``status``, the ``path`` of the input at fault,
``details`` and, for 503s, how long to wait (``Retry-After``)."""

from __future__ import annotations

from typing import Any

import httpx


class UisError(Exception):
    """An error answer of the service, or a routing decision the client made locally (status 0 = no answer)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int = 0,
        path: str | None = None,
        details: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" + (f" (at {path})" if path else ""))
        self.code = code
        self.message = message
        self.status = status
        self.path = path
        self.details = details
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """503s (not ready, no replica, draining) and 504s are worth retrying after ``retry_after`` seconds."""
        return self.status in (503, 504)


class BadRequestError(UisError):
    """400: the request must change (invalid body, a bad field named by ``path``, no model chosen)."""


class AuthenticationError(UisError):
    """401: missing or wrong bearer token."""


class NotFoundError(UisError):
    """404: unknown role, model, batch, engine or route."""


class ConflictError(UisError):
    """409: the service's state refuses the command now (operation id reused, phase not resident, lease blocked)."""


class UnavailableError(UisError):
    """503: the model or replica cannot serve now; ``retry_after`` says when to try again."""


class GatewayTimeoutError(UisError):
    """504: the engine or a barrier did not answer in time."""


class ConnectionFailedError(UisError):
    """The service could not be reached at all (status 0)."""


_BY_STATUS: dict[int, type[UisError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    404: NotFoundError,
    409: ConflictError,
    503: UnavailableError,
    504: GatewayTimeoutError,
}


def error_class(status: int) -> type[UisError]:
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return BadRequestError if 400 <= status < 500 and status not in (408, 429) else UisError


def make_error(
    code: str,
    message: str,
    *,
    status: int,
    path: str | None = None,
    details: Any = None,
    retry_after: float | None = None,
) -> UisError:
    return error_class(status)(
        code, message, status=status, path=path, details=details, retry_after=retry_after
    )


def _retry_after(response: httpx.Response, details: Any) -> float | None:
    header = response.headers.get("retry-after")
    if header is not None:
        try:
            return max(0.0, float(header))
        except ValueError:
            pass
    if isinstance(details, dict):
        value = details.get("retry_after_s")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def error_from_response(response: httpx.Response) -> UisError:
    """The error of an answer whose body was read. Reads our error body ``{"error": {"code", "message", "path"?, "details"?}}`` and OpenAI's
    ``{"error": {"message", "type", "param", "code"}}``; anything else keeps the status and the text."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        code = err.get("code") if isinstance(err.get("code"), str) else None
        details = err.get("details")
        path = err.get("path") if isinstance(err.get("path"), str) else err.get("param")
        return make_error(
            code or str(err.get("type") or f"http_{response.status_code}"),
            str(err.get("message") or response.reason_phrase),
            status=response.status_code,
            path=path if isinstance(path, str) else None,
            details=details,
            retry_after=_retry_after(response, details),
        )
    text = response.text[:500]
    return make_error(
        f"http_{response.status_code}",
        text or response.reason_phrase,
        status=response.status_code,
        retry_after=_retry_after(response, None),
    )
