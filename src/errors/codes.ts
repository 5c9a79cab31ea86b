/**
 * Every error code redfence raises. Codes are stable: they never change meaning once released.
 * docs/errors.md documents each one; a test keeps the two in step.
 */
export const ERROR_CODES = {
  RF_INVALID_ARGUMENT: {
    retriable: false,
    summary: 'A function was called with an argument it cannot accept.',
  },
  RF_INVALID_OPTIONS: {
    retriable: false,
    summary: 'Options failed validation; the message names the option path.',
  },
  RF_SCRIPT_NOT_FOUND: {
    retriable: false,
    summary: 'A Lua script or include named by the loader does not exist.',
  },
  RF_SCRIPT_INCLUDE_CYCLE: { retriable: false, summary: 'Lua includes form a cycle.' },
  RF_SCRIPT_ERROR: {
    retriable: false,
    summary: 'A fence script returned an error reply (bad input or a bug).',
  },
  RF_REDIS_UNAVAILABLE: {
    retriable: true,
    summary: 'Redis could not be reached or answered with a transient error.',
  },
  RF_REDIS_KEY_TYPE: {
    retriable: false,
    summary: 'A key redfence reads or writes holds another Redis type (WRONGTYPE): something else wrote it.',
  },
  RF_REDIS_AUTH: {
    retriable: false,
    summary: 'Redis refused the credentials, or the TLS handshake with it failed on a certificate.',
  },
  RF_REDIS_WRONG_KIND: {
    retriable: false,
    summary:
      'A single-node Redis client was pointed at a read-only replica or at a Redis Cluster node (found at start-up).',
  },
  RF_BAD_REPLY: {
    retriable: false,
    summary: 'A fence script replied in a shape this library version does not understand.',
  },
  RF_UNSAFE_REDIS: {
    retriable: false,
    summary: 'Redis is configured in a way that breaks the guarantees (e.g. an evicting maxmemory-policy).',
  },
  RF_KAFKA_AUTH: {
    retriable: false,
    summary:
      "A Kafka client could not connect as configured (SASL refused the credentials, the TLS handshake failed, or the listener speaks another protocol), or the brokers' ACLs refuse an operation the runtime needs (named with the resource and what to grant).",
  },
  RF_KAFKA_UNAVAILABLE: {
    retriable: true,
    summary:
      'The Kafka brokers did not answer a client that was connecting (refused, not resolved, timed out): check the bootstrap servers.',
  },
  RF_KAFKA_FATAL: {
    retriable: false,
    summary:
      'The Kafka client cannot go on (e.g. the transactional producer was fenced); the processor closes itself.',
  },
  RF_COMMIT_UNCONFIRMED: {
    retriable: true,
    summary:
      'An at-least-once offset commit was not stored by the group coordinator in time; the batch is redelivered.',
  },
  RF_STATE_CORRUPT: {
    retriable: false,
    summary: 'A state hash in Redis does not have the fields redfence writes.',
  },
  RF_INVALID_STATE: {
    retriable: false,
    summary: 'A method was called in a lifecycle state that does not allow it (e.g. start() after close()).',
  },
  RF_TOPIC_MISSING: {
    retriable: false,
    summary: 'A topic the processor reads or writes does not exist (and creating it was not asked for).',
  },
  RF_TOPIC_PARTITIONS: {
    retriable: false,
    summary:
      "A repartition topic exists with another partition count than the topology's repartition() asks for (numberOfPartitions).",
  },
  RF_TOPIC_PATTERN_UNMATCHED: {
    retriable: false,
    summary:
      "A topology source's pattern matched no topic at start (the application's own topics left out); the message names the node and the pattern.",
  },
  RF_CAS_CONFLICT: {
    retriable: true,
    summary: 'A compare-and-set on a key kept conflicting: another writer changes it concurrently.',
  },
  RF_USER_RESULT: {
    retriable: false,
    summary:
      "A processor's reduce or operation returned something of the wrong shape; the record goes to the dead-letter topic.",
  },
  RF_MODULE_INVALID: {
    retriable: false,
    summary: 'The module given to `redfence run` cannot be loaded or exports no valid processor definition.',
  },
  RF_KIT_CACHE_WAIT_TIMEOUT: {
    retriable: true,
    summary: 'A cache read waited longer than waitTimeoutMs for another process to load the entry.',
  },
  RF_KIT_LOCK_TIMEOUT: {
    retriable: true,
    summary: 'A fenced lock could not be acquired within waitMs: another owner holds it.',
  },
  RF_KIT_LOCK_LOST: {
    retriable: false,
    summary: 'A fenced lock is no longer held by this token (it expired or was taken over).',
  },
  RF_KIT_EVICTION_POLICY: {
    retriable: false,
    summary:
      'A fenced lock refused a Redis whose maxmemory-policy may evict keys without a TTL (allkeys-*): an evicted fencing counter would restart the fencing numbers.',
  },
  RF_KIT_FENCED: {
    retriable: false,
    summary: 'A write carried a fencing number older than one the protected store has already seen.',
  },
  RF_KIT_RATE_LIMITED: {
    retriable: true,
    summary: 'A rate limit refused the call; details.retryAfterMs says when it would be admitted.',
  },
  RF_KIT_INVALIDATION_KEY: {
    retriable: false,
    summary:
      'An invalidation event names no usable cache entry (no tenant, a missing field, an unknown cache); it is dead-lettered, never retried.',
  },
  RF_HANDLER_DECODE: {
    retriable: false,
    summary:
      "A handler's decode function (default JSON.parse) failed on a record value; the record goes to the dead-letter topic.",
  },
  RF_HANDLER_FENCED: {
    retriable: false,
    summary:
      'ctx.once found a newer owner epoch on the partition: this instance is a zombie for it, its work is not marked done and its record is not committed.',
  },
  RF_HANDLER_TIMEOUT: {
    retriable: true,
    summary:
      "A handler's handle call ran past retry.attemptTimeoutMs: ctx.signal aborts with this reason, and a call that then throws has failed with it (retried like any retriable failure).",
  },
  RF_HANDLER_ABANDONED: {
    retriable: false,
    summary:
      "A handler's record was abandoned (its partition was revoked or lost, or close() passed its deadline); ctx.signal aborts with this reason and the record is not committed.",
  },
  RF_RETRY_TOPIC_PARTITIONS: {
    retriable: false,
    summary:
      "A handler's retry topic has a different partition count from its input topic; a retried record goes to the same partition number.",
  },
  RF_PG_MISSING: {
    retriable: false,
    summary: 'The outbox needs the optional peer dependency `pg`, which is not installed.',
  },
  RF_OUTBOX_MISSING: {
    retriable: false,
    summary: 'The outbox table (or a table beside it) does not exist: run `redfence outbox init` first.',
  },
  RF_OUTBOX_NAME_CLASH: {
    retriable: false,
    summary:
      "The outbox relay's progress topic holds another outbox's progress (the same names on one Kafka cluster): the relay refused to start.",
  },
  RF_POSTGRES_UNAVAILABLE: {
    retriable: true,
    summary: 'PostgreSQL could not be reached or failed a query the outbox relay retries.',
  },
  RF_KIT_IDEMPOTENCY_IN_FLIGHT: {
    retriable: true,
    summary:
      'An idempotency key is claimed by a request that has not finished (answer 409); the duplicate did not run.',
  },
  RF_KIT_IDEMPOTENCY_MISMATCH: {
    retriable: false,
    summary: 'An idempotency key was reused with a different request fingerprint (answer 422); nothing ran.',
  },
  RF_TOPOLOGY_INVALID: {
    retriable: false,
    summary:
      'A streams topology failed a check at build(): a bad window, a store or node name used twice, no sink, a sink writing to a source topic, a bad repartition() count or name; the message names the node.',
  },
  RF_TOPOLOGY_UNSUPPORTED: {
    retriable: false,
    summary:
      'A built topology uses something its Redis runtime does not run yet (a repartition, several input topics, reduce or aggregate, sliding or session windows, emit final); the message names the node.',
  },
  RF_TOPOLOGY_FENCED: {
    retriable: false,
    summary:
      'A topology batch met a newer owner epoch on a key of its partition: this instance is a zombie for it; the batch must not be committed.',
  },
  RF_TOPOLOGY_NODE_THREW: {
    retriable: false,
    summary:
      "A topology's function or serde threw where the record cannot be a dead letter (a later read-then-write round, stored state its serde cannot read); the message names the node and the record's topic, partition and offset.",
  },
  RF_STORE_UNKNOWN: {
    retriable: false,
    summary:
      "A state query named a store the topology does not have; details.stores lists the topology's stores.",
  },
  RF_STORE_KIND: {
    retriable: false,
    summary:
      'A state query asked a store for another kind of read (a window fetch of a key-value store, ...); the message names the store, its kind and the call that reads it.',
  },
  RF_STATE_BUSY: {
    retriable: true,
    summary:
      'A state read too wide for one script (read in parts) kept seeing writes to the key between its parts; ask again or narrow the range.',
  },
  RF_STATE_LAYOUT: {
    retriable: false,
    summary:
      "A topology's state in Redis was written in a layout this version does not read (time windows from before a window kept its timestamp in its own key); rebuild the application's state.",
  },
} as const satisfies Record<string, { retriable: boolean; summary: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;
