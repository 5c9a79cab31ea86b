# The suite's split, sourced by scripts/test.sh (not run on its own). Each list is a set of extended
# regular expressions over the test files' paths (test/...).
#
# SERIAL: files that run one at a time, after the others, with the machine to themselves:
#  - they stop or pause a shared service (test/kafka/commit.test.ts and start-paused SIGSTOP the broker: any other file
#    running beside it would wait out its pause), or
#  - they are CPU-bound for minutes (chaos and failover runs, kill/restart fault loops, the packed install
#    with its npm installs on every Node version, the demo): beside other files on 2 cores they would
#    starve their own child processes and the timing-sensitive fault windows they arm; or
#  - they load the machine at once with a JVM and dozens of clients: run-equals-kstreams runs ten Kafka
#    Streams applications in one JVM beside 27 exactly-once processors (about 45 s alone); in the
#    concurrent pass of one CI run it did not finish in 300 s.
# Every other file mostly waits (rebalances, session timeouts, transaction markers, polls) and uses its
# own topics, groups, Redis keys and PostgreSQL schemas (uniqueName / a random schema), so several run at
# once (REDFENCE_TEST_CONCURRENCY, default 3).
SERIAL=(
  '^test/chaos/'
  '^test/kafka/(commit|start-paused)\.test\.ts$'
  '^test/cli/pack\.test\.ts$'
  '^test/cli/workers\.test\.ts$'
  '^test/cli/outage\.test\.ts$'
  '^test/processor/(faults|crash|topology-crash|wait-replicas-failover)\.test\.ts$'
  '^test/outbox/(chaos|pg-drop|broker-down)\.test\.ts$'
  '^test/examples/demo\.test\.ts$'
  '^test/console/browser\.test\.ts$'
  '^test/(snapshot|ops)/rebuild\.test\.ts$'
  '^test/topology/run-equals-kstreams\.test\.ts$'
)

# AGAIN: what runs on the other Node versions (the full suite runs on the main line). What can differ
# between versions: the Kafka client's native binding (one binary per ABI), module loading (tsx, ESM,
# the built CLI loading a user's .ts module), the processor's and the handler's cores and the runtime
# skeleton they share (lifecycle, committer, options; timers,
# AbortSignal, async context), the fence's scripts through ioredis. The packed install already installs
# and runs on every prepared version inside test/cli/pack.test.ts, so it is not repeated.
AGAIN=(
  '^test/env/'
  '^test/kafka/(callback-failure|client-config|delivery|pause-dispatch|pause-stress|seek-during-fetch|security|topics)\.test\.ts$'
  '^test/fence/(decision-table|wire|script-loader|apply-many)\.test\.ts$'
  '^test/processor/(processor|lifecycle|close|user-call|kafka-step-failure|dead-letter|watchdog)\.test\.ts$'
  '^test/handler/'
  '^test/runtime/'
  '^test/cli/(cli|run-handler|options)\.test\.ts$'
  '^test/telemetry/'
  '^test/errors/'
  '^test/examples/smoke\.test\.ts$'
)

# joins a list into one alternation
rf_join() { local IFS='|'; echo "$*"; }
