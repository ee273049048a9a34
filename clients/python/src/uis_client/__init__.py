"""Python client of the Unified Inference Service (uis)."""

from .errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    ConnectionFailedError,
    GatewayTimeoutError,
    NotFoundError,
    UisError,
    UnavailableError,
)

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "ConnectionFailedError",
    "GatewayTimeoutError",
    "NotFoundError",
    "UisError",
    "UnavailableError",
]
__version__ = "0.1.0"
