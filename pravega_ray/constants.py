"""Every limit and default in one place.

Changing a wire or storage constant (marked *format*) changes what is on disk
or on the wire; do so only with a format version bump.
"""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB

# --- Events and appends -------------------------------------------------------------------
MAX_EVENT_SIZE_BYTES = 8 * MIB
"""Largest ordinary event (Pravega's limit); a larger one, up to ``LARGE_EVENT_BYTES_MAX``, is a
large event written through a transient segment."""

EVENT_HEADER_BYTES = 8
"""*format* Event frame header: 4-byte type + 4-byte payload length, big-endian."""

EVENT_TYPE_PLAIN = 0
"""*format* Frame type of an ordinary event."""

APPEND_BLOCK_BYTES_TARGET = 1 * MIB
"""A writer closes an append block once it holds this many bytes."""

APPEND_BLOCK_BYTES_MAX = MAX_EVENT_SIZE_BYTES + EVENT_HEADER_BYTES + 1 * MIB
"""Largest append block a container accepts."""

WRITER_SWITCH_INTERVAL_S = 0.001
"""The thread switch interval measured for ``WriterConfig.switch_interval_s`` (opt-in; see
pravega_ray/client/switch_interval.py): a caller computing between writes holds the interpreter
lock up to the interval each time the writer's threads need it, so with Python's 5 ms default
acks were about 3x slower than with a caller that sleeps, and about 1.2-1.5x with this."""

WRITER_LINGER_S = 0.010
"""A writer sends a partly filled block after at most this long, when the window has room.
A segment with nothing in flight sends at once, and an acknowledgement wakes the writer, so a
partial block waits for the earlier block's ack or this long, whichever comes first (Pravega's
writer batches for a target of 10 ms too). Each append call costs the machine about 2 ms of CPU
(docs/benchmarks.md, "Linger"): with 2 ms, a paced writer on 4 segments made so many calls that
the calls queued."""

WRITER_BLOCKS_IN_FLIGHT_MAX = 16
"""Append blocks a writer keeps in flight per segment (docs/stack.md: no gain beyond ~16)."""

WRITER_BLOCKS_QUEUED_MAX = 64
"""Full blocks a writer holds per segment beyond those in flight; write_event then blocks."""

WRITER_BLOCKS_IN_FLIGHT_LIMIT = 1024
"""Largest ``WriterConfig.blocks_in_flight_max`` a writer accepts."""

WRITER_BLOCKS_QUEUED_LIMIT = 4096
"""Largest ``WriterConfig.blocks_queued_max`` a writer accepts (queued blocks are in memory)."""

WRITER_RECONNECT_ATTEMPTS_MAX = 60
"""How often a writer retries setup_append on a dead container before failing its events."""

WRITER_RECONNECT_BACKOFF_S = 0.25
APPEND_CALL_TIMEOUT_S = 60.0
"""An append call unanswered this long is treated as outcome-unknown and resolved by
setup_append (safe: appends are conditional). Far above any legitimate append time."""

WRITER_RECONNECT_ATTEMPTS_LIMIT = 10_000
"""Largest ``WriterConfig.reconnect_attempts_max`` a writer accepts."""

WRITER_DELAY_S_LIMIT = 60.0
"""Largest ``WriterConfig.linger_s`` and ``reconnect_backoff_s`` a writer accepts."""

APPEND_CALL_TIMEOUT_S_LIMIT = 3600.0
"""Largest ``WriterConfig.append_call_timeout_s`` a writer accepts."""

ROUTING_KEY_CACHE_ENTRIES_MAX = 65_536

NO_EVENT_NUMBER = -(2**63)
"""Value of a writer attribute that was never set (Pravega's NULL_ATTRIBUTE_VALUE)."""

# --- Segment container --------------------------------------------------------------------
DEFAULT_CONTAINER_COUNT = 4
GROUP_COMMIT_BYTES_MAX = 4 * MIB
"""Most bytes of operations one group commit (one fsync) carries, unless one operation is larger."""

MERGE_COPY_BYTES_MAX = 4 * MIB
"""A merge whose source holds at most this many bytes copies them into its log record; a
bigger one first flushes it and its target to Tier-2 so that it is metadata only. (A
flush costs far more than logging a small transaction's bytes again.)"""
GROUP_COMMIT_OPERATIONS_MAX = 4096
ATTRIBUTE_UPDATES_MAX = 8192
"""Most attribute values one operation (append or attribute update) may set."""
APPEND_REORDER_WAIT_S = 5.0
"""How long an append whose predecessor has not arrived yet waits before failing its condition."""

READ_BYTES_MAX = 8 * MIB
"""Largest read a container serves in one call."""

READ_WAIT_S_MAX = 60.0
"""Longest tail long-poll a container accepts."""

READ_CACHE_BYTES_MAX = 256 * MIB
"""Per container: bytes of Tier-2-backed data kept in the read cache before eviction."""

STORAGE_FLUSH_BYTES = 4 * MIB
"""The storage writer flushes a segment to Tier-2 once this many bytes are pending..."""

STORAGE_FLUSH_INTERVAL_S = 1.0
"""...or once its oldest unflushed byte is this old."""

ATTRIBUTE_CACHE_ENTRIES_MAX = 200_000
"""Per container: extended attribute values kept in memory; clean ones beyond are evicted."""

ATTRIBUTE_FLUSH_ENTRIES = 10_000
"""A segment's dirty attributes go to the attribute index at this many (or when 1 s old)."""

STORAGE_WRITER_TICK_S = 0.1
"""How often the storage writer looks for segments due for a flush."""

# --- Durable log --------------------------------------------------------------------------
LOG_FRAME_BYTES_MAX = 64 * MIB
LOG_FILE_BYTES_MAX = 64 * MIB
"""The filesystem log starts a new file past this size, so truncation can delete whole files."""

CHECKPOINT_INTERVAL_S = 5.0
"""The storage writer writes a metadata checkpoint (and truncates the log) at most this often..."""

TIER1_UNFLUSHED_BYTES_MAX = 512 * MIB
"""Per container: appends wait while Tier-1 holds more bytes not yet in Tier-2 than this
(backpressure when Tier-2 is slow or down; ``segmentstore/throttle.py``)."""
TIER1_THROTTLE_WAIT_S = 30.0
"""A throttled append waits at most this long, then is answered ContainerThrottledError
(retried by its writer): below ``APPEND_CALL_TIMEOUT_S``."""
CHECKPOINT_LOG_BYTES = 32 * MIB
"""...and at least once this many log bytes were written since the last one."""

TRAFFIC_TIME_CONSTANT_S = 10.0
"""Time constant of the smoothed per-segment event and byte rates (exponential decay)."""

# --- Auto-scaling (segment store side: segmentstore/auto_scale.py) ---------------------------
AUTO_SCALE_PERIOD_S = 2.0
"""How often a container compares its segments' rates with their scaling policies."""

AUTO_SCALE_COOLDOWN_S = 10.0
"""No report for a segment within this long after the monitor first saw it (its creation,
or the container's recovery) or after its last delivered report."""

AUTO_SCALE_MUTE_S = 30.0
"""A report is not repeated in the same direction within this long (an "up" also mutes
"down"): Pravega's mute duration, for when the controller did not act on a report."""

AUTO_SCALE_COLD_FRACTION = 0.5
"""A segment is cold when its rate stays below ``target_rate`` times this for a period."""

AUTO_SCALE_WARMUP_S = TRAFFIC_TIME_CONSTANT_S
"""A segment is not judged until its rate tracker ran this long (after one time constant the
smoothed rate shows 63% of a steady rate, so a segment at target never looks cold)."""

AUTO_SCALE_REPORTS_PER_PERIOD_MAX = 1000
"""Most reports one container delivers per period; the rest stay due for the next."""

AUTO_SCALE_POLICY_READS_PER_PERIOD_MAX = 256
"""Most segments whose policy one period reads from the attribute index (after a recovery or
an eviction); the rest are read in later periods."""

AUTO_SCALE_REPORT_TIMEOUT_S = 30.0
"""A reporter call taking longer is given up (outcome unknown: the report may come again)."""

# --- Names --------------------------------------------------------------------------------
NAME_LENGTH_MAX = 255
SYSTEM_SCOPE = "_system"

# --- Streams ------------------------------------------------------------------------------
STREAM_SEGMENTS_MAX = 10_000
"""Most segments a stream may be created with (``ScalingPolicy.min_segments``)."""

# --- Readers ------------------------------------------------------------------------------
READER_READ_BYTES = 1 * MIB
"""Bytes a reader asks for per segment read."""

READER_LONG_POLL_S = 1.0
"""Longest tail wait of one reader read call; read_next_event loops over these."""

READER_GROUP_SYNC_INTERVAL_S = 0.2
"""How often a reader re-balances its segments with the reader group."""

READER_GROUP_OFFSETS_SAVE_INTERVAL_S = 1.0
"""Offsets readers report are stored with their group at most this often (ownership changes
are stored at once); ``reader_offline`` without a position returns segments there."""

READER_GROUP_STATE_ATTEMPTS_MAX = 100
"""Tries of one change of a reader group's state: each lost race (a conditional update
beaten by another reader's) or outcome-unknown call costs one."""

READER_GROUP_STATE_RETRY_PAUSE_S = 0.1
"""Pause before trying a state change again after an outcome-unknown call (a container
restarting); a lost race is tried again at once."""

READER_GROUP_STATE_CALL_TIMEOUT_S = 60.0
"""Longest wait for one call to a state segment's container (then: outcome unknown)."""

# --- Controller ---------------------------------------------------------------------------
CONTROLLER_CALL_TIMEOUT_S = 120.0
CONTROLLER_CALL_ATTEMPTS_MAX = 60
"""Client calls retried (0.5 s apart) while the controller actor restarts."""

CONTAINER_CALL_ATTEMPTS_MAX = 120
"""Controller calls to a container retried (0.5 s apart) while it restarts."""

CONTAINER_RECOVERY_ATTEMPTS_MAX = 20
"""A container actor re-runs recovery this often on a RetriableError before giving up."""

CONTAINER_PLACEMENT_ATTEMPTS_MAX = 10
"""start_local re-creates a new container found off its node at most this often."""

# --- Controller workflows (request event processor) ----------------------------------------
REQUEST_CONCURRENCY = 4
"""Requests about different streams the request event processor runs side by side."""
REQUEST_POSTPONE_S = 0.1
"""A postponed request (its temporary property not written yet) is tried again this soon..."""
REQUEST_POSTPONE_MAX_S = 1.0
"""...and, while every request of its stream keeps waiting, ever later (doubling) up to this."""
REQUEST_EXPIRY_S = 60.0
"""...until it is this old; then it is dropped (the caller that posted it failed)."""
REQUEST_TRUNCATE_BYTES = 1 * MIB
"""Handled requests are truncated from the request stream once this many bytes are behind."""
REQUEST_CHECKPOINT_INTERVAL_S = 1.0
"""An event processor stores its checkpoint at most this often (Pravega's periodic checkpoint
config): after a request finishes, at once if the last was stored this long ago, else by its
reading loop once this long has passed. A processor that dies runs again at most this long's
worth of finished requests (every workflow is idempotent); each checkpoint is an update of a
watched controller table, which every other watcher acknowledges."""
REQUEST_READ_WAIT_S = 1.0
"""How long an event processor's reading loop waits at the tail of its request stream while it
handles nothing and no stream rests (a new request wakes the read at once; a resting stream
shortens the wait to the end of its rest). Short waits cost idle CPU: each is a Ray call to a
container."""
REQUEST_POLL_S = 0.05
"""...and while requests are being handled (a handler may start a rest meanwhile)."""
WORKFLOW_WAIT_S = 120.0
"""How long a stream manager call (scale, update, seal, delete) waits for its workflow."""
WORKFLOW_POLL_S = 0.02
"""How often the stream manager asks whether a workflow finished."""
RETENTION_BUCKETS_DEFAULT = 4
"""Streams are hashed into this many buckets; each bucket's actor runs their periodic work."""
RETENTION_PERIOD_S_DEFAULT = 1800.0
"""How often each stream bucket runs the retention cycle of its streams (30 minutes, Pravega's
default); ``start_local(retention_period_s=...)`` changes it."""
CHECKPOINTS_OUTSTANDING_MAX = 3
"""Checkpoints of one reader group under way at once (Pravega's default); one more is
CheckpointFailedError."""
TIME_INDEX_RESOLUTION_MS = 10
"""A segment's time index keeps at most one entry per this many milliseconds: a cut at a time
is exact to the first event stored in the first slot at or after it."""
BUCKET_PERIOD_S = 10.0
"""How often a bucket actor looks at each of its streams (the auto-scale merge sweep)."""
WATERMARK_PERIOD_S_DEFAULT = 10.0
"""How often each stream bucket runs the watermark workflow of its streams with writers'
marks (Pravega's default); ``start_local(watermark_period_s=...)`` changes it."""
WATERMARK_WRITER_TIMEOUT_S = 60.0
"""A writer that noted no time for this long is dropped from its stream's watermarks."""
WATERMARK_SEGMENT_KEEP_BYTES = 1 * MIB
"""A stream's mark segment keeps its newest watermarks, between this many bytes and twice as
many (about 7,000 to 14,000 of one or two segments each, 19 to 38 hours at the default
period); older ones are truncated, so a stream noting time for a year keeps megabytes, not
hundreds. A reader (or a batch's ``time_window``) behind every watermark kept gets a window
with no lower bound until it passes one."""
AUTO_SCALE_STREAM_COOLDOWN_S = 10.0
"""After a scale, auto-scale reports about the stream are ignored this long (one burst
scales once)."""
AUTO_SCALE_COLD_MARK_S = 120.0
"""A segment marked cold stays a merge candidate this long without a new cold report."""

# --- Transactions and large events ----------------------------------------------------------
TXN_LEASE_S_DEFAULT = 30.0
"""A transaction's lease when the writer is not told: it is aborted this long after its
last ping."""
TXN_LEASE_S_MAX = 600.0
"""Longest lease one create or ping may ask for."""
TXN_MAX_EXECUTION_S = 3600.0
"""A transaction must be committed or aborted within this long of its creation: pings
cannot extend its lease beyond it (LeaseExpiredError), and the timer aborts it then."""
TXN_COMPLETED_KEEP_S = 600.0
"""A committed or aborted transaction's status stays queryable this long, then is forgotten."""
TXN_TIMER_PERIOD_S = 0.5
"""How often the transaction timer looks for leases that ran out."""
LARGE_EVENT_BYTES_MAX = 1024 * MIB
"""Largest event ``write_event`` takes; one over MAX_EVENT_SIZE_BYTES is a *large event*
written through a transient segment."""
TRANSIENT_SEGMENT_IDLE_S = 300.0
"""An unmerged transient segment untouched this long is deleted by its container's cleanup."""
TRANSIENT_CLEANUP_PERIOD_S = 60.0
"""How often a container looks for idle transient segments."""

# --- Cluster manager ------------------------------------------------------------------------
CLUSTER_MANAGER_PERIOD_S = 2.0
"""How often the cluster manager looks at the alive Ray nodes and the containers' places."""

CLUSTER_MANAGER_CALL_TIMEOUT_S = 300.0
"""Longest the cluster manager waits for one step of a move: a stopped container's name to
free, or a moved container to answer (it answers once recovered, so this bounds recovery;
a container still recovering then is left alone, not stopped)."""

CLUSTER_MANAGER_RETRY_PERIODS = 5
"""A move that failed is tried again after this many periods, doubled for each failure in a
row (at most 32 times); a container found stopped is created again at once."""

# --- Table segments and key-value tables -----------------------------------------------------
TABLE_KEY_BYTES_MAX = 8 * KIB
"""Longest table key (Pravega's ``TableSegment.MAXIMUM_KEY_LENGTH``)."""
TABLE_VALUE_BYTES_MAX = 1 * MIB
"""Longest table value (Pravega allows 1,040,384 bytes)."""
TABLE_BATCH_BYTES_MAX = 8 * MIB
"""Largest serialized update batch on one table segment (one append)."""
TABLE_BATCH_KEYS_MAX = 4096
"""Most keys in one table update batch (each key is one attribute of the append)."""
TABLE_GET_KEYS_MAX = 4096
"""Most keys one table get asks a container for; clients split bigger lookups."""
TABLE_ITERATE_LIMIT = 1000
"""Entries per page when a key-value table is iterated."""
KVT_PARTITIONS_DEFAULT = 4
"""Partitions of a key-value table when ``create_key_value_table`` is not told."""
KVT_PARTITIONS_MAX = 1024
"""Most partitions (table segments) one key-value table may have."""
CONTROLLER_METADATA_PARTITIONS = 4
"""Table segments holding the controller's records in ``_system`` (a record goes to the
partition of its parent key). Fixed for a data directory: changing it strands records."""
CONTROLLER_METADATA_CACHE_BYTES = 64 * MIB
"""Most bytes of controller records one metadata store keeps cached in memory (values as
stored, plus a per-entry overhead); the least recently used go first."""
TABLE_WATCH_LEASE_S = 2.5
"""How long a controller instance's lease on a table segment of its records lasts after each
``table_watch`` call (``segmentstore/table_watches.py``): an update waits at most this long for
a watcher that died, and a recovered container holds updates of those segments this long."""
TABLE_WATCH_WAIT_S = 1.0
"""How long a ``table_watch`` call waits for a change before it answers none (the lease is
renewed at each call, so this must be well under ``TABLE_WATCH_LEASE_S``)."""

TABLE_COMPACTION_MIN_BYTES = 64 * KIB
"""A table segment is compacted only once it stores at least this many bytes
(``segmentstore/table_compactor.py``)."""
TABLE_COMPACTION_MIN_UTILIZATION = 0.75
"""... and only while fewer than this fraction of its stored entries are live."""
TABLE_COMPACTION_ROUND_BYTES = 1 * MIB
"""How much of a table segment's head one compaction round reads (it copies the live
entries of it to the tail, then truncates it)."""

WRITE_LOG_RETENTION_S = 7 * 24 * 3600.0
"""How long a finished (COMMITTED or ABORTED) exactly-once write's record is kept
(``data/write_log.py``): a write id reused later than this after its write finished writes
again (Kafka's ``transactional.id.expiration.ms`` is the analogue, also 7 days)."""
WRITE_LOG_RETENTION_S_MAX = 10 * 365 * 24 * 3600.0
"""Longest write-log retention accepted (ten years: "for ever" in practice)."""
