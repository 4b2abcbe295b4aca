"""pravega-ray: durable, exactly-once streams on Ray.

Importing this package does not import Ray: ``start_local``, ``connect``, the
``data`` (Ray Data) connectors and the ``spark`` bridge load it on first use (so
the core stays Ray-free and fast to test). The public names are listed in
``__all__`` and documented in ``docs/api.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pravega_ray import errors
from pravega_ray.client.batch_client import BatchClient, SegmentReadRange
from pravega_ray.client.byte_stream import ByteStreamReader, ByteStreamWriter
from pravega_ray.client.event_pointers import EventPointer
from pravega_ray.client.events import Checkpoint, EventRead, Position
from pravega_ray.client.key_value_table import KeyValueTable, TableEntry, TableKey
from pravega_ray.client.kvt_families import Insert, Put, Remove
from pravega_ray.client.reader import EventStreamReader
from pravega_ray.client.reader_group import (
    ReaderGroup,
    ReaderSegmentDistribution,
    SegmentDistribution,
)
from pravega_ray.client.serializers import (
    ArrowIpcSerializer,
    BytesSerializer,
    JsonSerializer,
    Serializer,
    Utf8Serializer,
)
from pravega_ray.client.state_synchronizer import StateSynchronizer
from pravega_ray.client.stream_manager import StreamManager
from pravega_ray.client.transactional_writer import Transaction, TransactionalEventStreamWriter
from pravega_ray.client.writer import EventStreamWriter, WriteFuture
from pravega_ray.client.writer_config import WriterConfig
from pravega_ray.contracts.records import (
    KeyValueTableInfo,
    KeyValueTableState,
    SegmentRange,
    StreamInfo,
    StreamState,
    TxnInfo,
    TxnStatus,
)
from pravega_ray.contracts.watermarks import TimeWindow
from pravega_ray.errors import *
from pravega_ray.stream_configuration import (
    ReaderGroupConfig,
    RetentionConfigType,
    RetentionPolicy,
    ScalingPolicy,
    StreamConfiguration,
)
from pravega_ray.stream_cut import StreamCut

if TYPE_CHECKING:
    from pravega_ray import data, spark
    from pravega_ray.cluster import Cluster, connect, start_local

__version__ = "0.1.0"

_LAZY = {
    "Cluster": ("pravega_ray.cluster", "Cluster"),
    "connect": ("pravega_ray.cluster", "connect"),
    "start_local": ("pravega_ray.cluster", "start_local"),
    "data": ("pravega_ray.data", None),
    "spark": ("pravega_ray.spark", None),
}


def __getattr__(name: str) -> Any:
    """Load the Ray-dependent parts of the API on first use."""
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'pravega_ray' has no attribute {name!r}")
    module = importlib.import_module(target[0])
    value = module if target[1] is None else getattr(module, target[1])
    globals()[name] = value
    return value


# Sorted (a test checks), every name written out so type checkers see what is exported.
__all__ = [
    "AlreadyExistsError",
    "ArrowIpcSerializer",
    "BadKeyVersionError",
    "BatchClient",
    "ByteStreamReader",
    "ByteStreamWriter",
    "BytesSerializer",
    "Checkpoint",
    "CheckpointFailedError",
    "ClientClosedError",
    "Cluster",
    "ConditionalAppendFailedError",
    "ConditionalUpdateError",
    "ConfigurationError",
    "ConflictingUpdateError",
    "ContainerNotReadyError",
    "ContainerThrottledError",
    "ControllerUnavailableError",
    "DataCorruptionError",
    "EventPointer",
    "EventRead",
    "EventStreamReader",
    "EventStreamWriter",
    "EventTooLargeError",
    "FencedError",
    "IllegalStateError",
    "IllegalStateTransitionError",
    "Insert",
    "InvalidArgumentError",
    "InvalidNameError",
    "JsonSerializer",
    "KeyValueTable",
    "KeyValueTableInfo",
    "KeyValueTableNotFoundError",
    "KeyValueTableState",
    "LeaseExpiredError",
    "NoSuchEventError",
    "NoSuchKeyError",
    "NotFoundError",
    "Position",
    "PravegaError",
    "Put",
    "ReaderAlreadyExistsError",
    "ReaderGroup",
    "ReaderGroupConfig",
    "ReaderGroupNotFoundError",
    "ReaderNotInGroupError",
    "ReaderSegmentDistribution",
    "ReinitializationRequiredError",
    "Remove",
    "RetentionConfigType",
    "RetentionPolicy",
    "RetriableError",
    "ScaleConflictError",
    "ScalingPolicy",
    "ScopeNotEmptyError",
    "ScopeNotFoundError",
    "SegmentDistribution",
    "SegmentExistsError",
    "SegmentNotFoundError",
    "SegmentRange",
    "SegmentReadRange",
    "SegmentSealedError",
    "SegmentStoreUnavailableError",
    "SegmentTruncatedError",
    "SerializationError",
    "Serializer",
    "StateSynchronizer",
    "StateSynchronizerNotFoundError",
    "StorageUnavailableError",
    "StreamConfiguration",
    "StreamCut",
    "StreamInfo",
    "StreamManager",
    "StreamNotFoundError",
    "StreamNotSealedError",
    "StreamSealedError",
    "StreamState",
    "TableEntry",
    "TableKey",
    "TimeWindow",
    "Transaction",
    "TransactionalEventStreamWriter",
    "TruncatedDataError",
    "TxnFailedError",
    "TxnInfo",
    "TxnNotFoundError",
    "TxnStatus",
    "Utf8Serializer",
    "WireProtocolError",
    "WriteFuture",
    "WriterConfig",
    "__version__",
    "connect",
    "data",
    "errors",
    "spark",
    "start_local",
]
