/**
 * The `redfence` command line: one file per verb, each with its option table (options.ts). A verb's
 * failure ends as one line on stderr, `redfence <verb>: <message> [<code>]`, and exit 2 for what the
 * user must fix in the command (options, the module, a missing topic), 1 otherwise.
 */
// Only the error class here: --help, --version and bad options answer without loading the runtime.
import { type ErrorCode, RedfenceError } from '../errors/index.js';
import { VERSION } from '../version.js';

const HELP = `redfence ${VERSION}: effectively-once Kafka stream processing with state in Redis

Usage:
  redfence --help              show this help
  redfence --version           print the version
  redfence run <module> [options]
                               run the processor a module exports (redfence run --help for options)
  redfence inspect <store> <key> [options]
                               print a key's value, fence (partition, offset, epoch) and pending entries
                               (redfence inspect --help for options)
  redfence state <get|windows> <module> <store> <key> [options]
                               read a topology's store for one key (a value, or windows and sessions),
                               stamped with the partition and offset it reflects (redfence state --help)
  redfence reconcile <module> [options]
                               compare the store in Redis with a fold of the input log; report each
                               anomaly by kind (redfence reconcile --help for options)
  redfence rebuild <module> [options]
                               restore a processor's store into an empty Redis from its snapshot topic
                               and replay the input through the fence (redfence rebuild --help)
  redfence lag --group <id> [options]
                               per-partition lag status of any consumer group (OK, WARN, STALL, STOP,
                               REWIND, ERR); exit 1 when one is not OK (redfence lag --help for options)
  redfence dlq <stats|show|replay> --topic <dlt> [options]
                               count, show or replay (once each) the dead letters of redfence, Spring,
                               Kafka Connect or Kafka Streams (redfence dlq --help)
  redfence chaos [<module>] [options]
                               run the fault harness against real Kafka and its own Redis, verify the
                               results; with a processor module, compare a faulted run of it with a
                               fault-free one, key by key (redfence chaos --help for options)
  redfence outbox <init|relay|status|retry> [options]
                               the PostgreSQL transactional outbox: create its tables, relay it to Kafka,
                               show its state, retry parked rows (redfence outbox --help)
  redfence console [options]   the web console: instances, lag, fence inspector, dead letters, outbox;
                               read-only unless --allow-actions with a token (redfence console --help)

Every verb reads its options from flags, then environment variables, then a JSON file given with
--config <file>, then defaults; its --help lists them.
`;

/** Codes that mean "fix the command line or what it names": exit 2. */
const USAGE: ReadonlySet<ErrorCode> = new Set([
  'RF_INVALID_OPTIONS',
  'RF_MODULE_INVALID',
  'RF_TOPOLOGY_INVALID',
  'RF_TOPOLOGY_UNSUPPORTED',
  'RF_TOPIC_MISSING',
  'RF_TOPIC_PARTITIONS',
  'RF_REDIS_AUTH',
  'RF_REDIS_WRONG_KIND',
  'RF_KAFKA_AUTH',
  'RF_PG_MISSING',
  'RF_OUTBOX_MISSING',
  'RF_OUTBOX_NAME_CLASH',
  'RF_STORE_UNKNOWN',
  'RF_STORE_KIND',
]);

const VERBS = {
  run: async () => (await import('./run.js')).run,
  inspect: async () => (await import('./inspect.js')).inspect,
  state: async () => (await import('./state.js')).stateCommand,
  chaos: async () => (await import('./chaos.js')).chaos,
  outbox: async () => (await import('./outbox.js')).outbox,
  reconcile: async () => (await import('./reconcile.js')).reconcileCommand,
  rebuild: async () => (await import('./rebuild.js')).rebuildCommand,
  lag: async () => (await import('./lag.js')).lag,
  dlq: async () => (await import('./dlq.js')).dlq,
  console: async () => (await import('./console.js')).consoleCommand,
} as const;

export async function main(
  argv: readonly string[],
  out: (s: string) => void = (s) => process.stdout.write(s),
  err: (s: string) => void = (s) => process.stderr.write(s),
): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    out(HELP);
    return cmd === undefined ? 1 : 0;
  }
  if (cmd === '--version' || cmd === '-v') {
    out(`${VERSION}\n`);
    return 0;
  }
  if (!Object.hasOwn(VERBS, cmd)) {
    err(`redfence: unknown command "${cmd}" (redfence --help lists them)\n`);
    return 2;
  }
  try {
    const verb = await VERBS[cmd as keyof typeof VERBS]();
    return await verb(rest, out);
  } catch (e) {
    const message = (e instanceof Error ? e.message : String(e)).replace(/\s*\n\s*/g, ' ');
    if (RedfenceError.is(e)) {
      err(`redfence ${cmd}: ${message} [${e.code}]\n`);
      return USAGE.has(e.code) ? 2 : 1;
    }
    err(`redfence ${cmd}: ${message}\n`);
    return 1;
  }
}
