"""Python client of the Unified Inference Service (uis): admin commands, discovery, direct routing with the rules
of ``@uis/routing``, deferred batches and OpenAI helpers."""

from .async_client import AsyncUisClient
from .client import UisClient
from .direct import DirectClient
from .discovery import DiscoveryEngine, DiscoveryModel, DiscoverySnapshot
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
from .models import (
    Batch,
    BatchPage,
    BatchSample,
    Event,
    Lease,
    ModelReplicas,
    OffloadReport,
    Transition,
    WeightUpdate,
    genrm_sample,
    teacher_sample,
)
from .watcher import DiscoveryWatcher

__all__ = [
    "AsyncUisClient",
    "AuthenticationError",
    "BadRequestError",
    "Batch",
    "BatchPage",
    "BatchSample",
    "ConflictError",
    "ConnectionFailedError",
    "DirectClient",
    "DiscoveryEngine",
    "DiscoveryModel",
    "DiscoverySnapshot",
    "DiscoveryWatcher",
    "Event",
    "GatewayTimeoutError",
    "Lease",
    "ModelReplicas",
    "NotFoundError",
    "OffloadReport",
    "Transition",
    "UisClient",
    "UisError",
    "UnavailableError",
    "WeightUpdate",
    "genrm_sample",
    "teacher_sample",
]
__version__ = "0.1.0"
