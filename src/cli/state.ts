/**
 * `redfence state get|windows <module> <store> <key>`: queryable state from the command line. The module
 * is the one `redfence run` runs (its default export a built topology), so the store ids, key encoding
 * and serdes are the running topology's; the answer is one consistent read (TopologyState), stamped
 * with the partition and offset of the last record applied to the key. Prints the values asked for
 * (a table, or JSON with --json) and nothing else: values never go to a log or an error. Exit 0: found;
 * 3: the key has no value (or no window in the range); 2: bad input (options, module, store name or
 * kind); 1: Redis failed (or Kafka, asked for the topics a pattern source matches). Every option is checked and the module loaded before any connection.
 */
import { RedfenceError } from '../errors/index.js';
import type { TopologyStamp } from '../index.js';
import { BROKERS_OPTION, kafkaClient } from './connection.js';
import { KAFKA_OPTIONS } from './kafka-options.js';
import { jsonLogger } from './log.js';
import { helpText, Invalid, listOption, type OptionSpec, parseOptions, switchOption } from './options.js';
import { connectRedis, REDIS_OPTIONS, redisClient, redisTarget } from './redis.js';

const DAY_MS = 86_400_000;
const invalid = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);

/** A time: ms since the epoch, or an ISO-8601 date. */
function timeOption(description: string, defaultText: string): OptionSpec<number, false> {
  const allowed = 'ms since the epoch or an ISO-8601 date (2026-01-31T12:00:00Z)';
  return {
    kind: 'value',
    placeholder: '<time>',
    description,
    allowed,
    default: undefined,
    defaultText,
    parse: (raw) => {
      const n = /^-?\d+$/.test(raw.trim()) ? Number(raw) : Date.parse(raw);
      return Number.isSafeInteger(n) ? n : new Invalid(` must be ${allowed}, got ${JSON.stringify(raw)}`);
    },
  };
}

const COMMON = {
  ...REDIS_OPTIONS,
  'key-json': switchOption({
    description:
      "read <key> as JSON before the store's key serde (for keys that are numbers or objects); otherwise the key is the text itself",
  }),
  json: switchOption({ description: 'print the answer as one JSON document' }),
  topics: listOption('<list>', {
    description:
      "the cluster's topic names (kafka-topics.sh --list), for a topology whose source is a pattern: resolved as the running processor resolves it at start (without it, listed from --brokers)",
    default: undefined,
    allowed: 'topic names, comma-separated',
    item: (t) => (/^[A-Za-z0-9._-]{1,249}$/.test(t) ? t : undefined),
  }),
  brokers: {
    ...BROKERS_OPTION,
    description: `${BROKERS_OPTION.description}: only for a topology whose source is a pattern, to list the topics it matches (unless --topics)`,
  },
  ...KAFKA_OPTIONS,
};

export const STATE_GET_OPTIONS = COMMON;
export const STATE_WINDOWS_OPTIONS = {
  ...COMMON,
  from: timeOption(
    'window store: the earliest window start; session store: the earliest session end',
    '--to minus one day (sessions: all)',
  ),
  to: timeOption(
    'window store: the latest window start; session store: the latest session start',
    'now (sessions: all)',
  ),
};

const ABOUT = `Reads a topology's store in Redis for one key, as of the last record applied to the key (its partition,
offset and epoch are printed with the answer). <module> is the module redfence run runs (its default
export a built topology): its application id, store names and serdes locate and decode the state.`;

export const STATE_GET_HELP = helpText(
  'redfence state get <module> <store> <key> [options]',
  `${ABOUT}\nA key-value store's value (an unwindowed count, reduce or aggregate) and its timestamp.\nExit 0: found; 3: no value; 2: bad input; 1: Redis (or Kafka) failed.`,
  STATE_GET_OPTIONS,
);
export const STATE_WINDOWS_HELP = helpText(
  'redfence state windows <module> <store> <key> [--from <time>] [--to <time>] [options]',
  `${ABOUT}\nA window store's windows starting in [--from, --to], or a session store's sessions overlapping it.\nExit 0: found; 3: none in the range; 2: bad input; 1: Redis (or Kafka) failed.`,
  STATE_WINDOWS_OPTIONS,
);

export const STATE_HELP = `redfence state get <module> <store> <key> [options]
redfence state windows <module> <store> <key> [--from <time>] [--to <time>] [options]

${ABOUT}
  get      a key-value store's value (an unwindowed count, reduce or aggregate) and its timestamp
  windows  a window store's windows starting in [--from, --to], or a session store's sessions
           overlapping it
Exit 0: found; 3: no value (no window in the range); 2: bad input; 1: Redis (or Kafka) failed.
Options: redfence state get --help, redfence state windows --help.
`;

type Verb = 'get' | 'windows';

/** A value as text: JSON; bytes as UTF-8 text when they are, else `base64:...`. */
function show(v: unknown): unknown {
  if (!Buffer.isBuffer(v)) return v;
  const t = v.toString('utf8');
  return Buffer.from(t, 'utf8').equals(v) ? t : `base64:${v.toString('base64')}`;
}

const iso = (ms: number) =>
  Number.isFinite(new Date(ms).getTime()) ? new Date(ms).toISOString() : String(ms);
const stampText = (s: TopologyStamp | null) =>
  s === null
    ? 'no record of this key applied'
    : `as of ${s.topic} partition ${s.partition}, offset ${s.offset} (epoch ${s.epoch})`;

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export async function stateCommand(args: readonly string[], out: (s: string) => void): Promise<number> {
  const [verb, ...rest] = args;
  if (verb === undefined || verb === '--help' || verb === '-h') {
    out(STATE_HELP);
    return verb === undefined ? 2 : 0;
  }
  if (verb !== 'get' && verb !== 'windows')
    throw invalid(
      `unknown subcommand ${JSON.stringify(verb)}: redfence state get|windows (redfence state --help)`,
    );
  return verb === 'get' ? run('get', rest, out) : run('windows', rest, out);
}

async function run(verb: Verb, args: readonly string[], out: (s: string) => void): Promise<number> {
  const options = verb === 'get' ? STATE_GET_OPTIONS : STATE_WINDOWS_OPTIONS;
  const { values, sources, positionals, help } = parseOptions(options, args);
  const usage = `redfence state ${verb} <module> <store> <key> [options]`;
  if (help) {
    out(verb === 'get' ? STATE_GET_HELP : STATE_WINDOWS_HELP);
    return 0;
  }
  const o = values as typeof values & { from?: number; to?: number };
  const [file, store, text, ...extra] = positionals;
  if (file === undefined || store === undefined || text === undefined || extra.length > 0)
    throw invalid(
      `${extra.length > 0 ? `unexpected arguments ${extra.join(' ')}` : 'missing <module> <store> <key>'}: ${usage} (redfence state ${verb} --help)`,
    );
  let key: unknown = text;
  if (o['key-json'])
    try {
      key = JSON.parse(text);
    } catch {
      throw invalid('--key-json: <key> is not JSON');
    }
  const target = redisTarget(o, sources);
  const { isBuiltTopology, loadRunnable } = await import('../loader/load.js');
  const built = await loadRunnable(file);
  if (!isBuiltTopology(built))
    throw new RedfenceError(
      'RF_MODULE_INVALID',
      `${file} exports no topology: redfence state reads the stores of a built topology (topology(...).build())`,
    );
  const { TopologyState } = await import('../index.js');
  const kafka = kafkaClient(o, 'redfence-state'); // checked before anything connects, used only if needed
  const redis = await redisClient(target, jsonLogger('error', '-'));
  try {
    const state = await stateOf(TopologyState, built, redis, o.topics, kafka);
    const kind = state.kindOf(store);
    if ((verb === 'get') !== (kind === 'key-value'))
      throw new RedfenceError(
        'RF_STORE_KIND',
        `store ${JSON.stringify(store)} is a ${kind} store: read it with redfence state ${kind === 'key-value' ? 'get' : 'windows'}`,
        { details: { store, kind, wanted: verb === 'get' ? 'key-value' : 'window' } },
      );
    const head = { store, kind, key: show(key) };
    const keyText = typeof key === 'string' ? key : JSON.stringify(key);
    await connectRedis(redis, target, o['connect-timeout'], true);
    if (kind === 'key-value') {
      const a = await state.keyValueStore(store).get(key);
      if (o.json)
        out(`${JSON.stringify({ ...head, value: show(a.value), timestamp: a.timestamp, stamp: a.stamp })}\n`);
      else if (a.value === null) out(`${store} ${keyText}: no value, ${stampText(a.stamp)}\n`);
      else
        out(
          `${store} ${keyText}: ${JSON.stringify(show(a.value))} (timestamp ${a.timestamp} ${iso(a.timestamp ?? 0)}), ${stampText(a.stamp)}\n`,
        );
      return a.value === null ? 3 : 0;
    }
    const ranged = o.from !== undefined || o.to !== undefined || kind === 'window';
    const to = o.to ?? (o.from === undefined ? Date.now() : Number.MAX_SAFE_INTEGER);
    const from = o.from ?? (kind === 'window' ? to - DAY_MS : Number.MIN_SAFE_INTEGER);
    const range = ranged ? { from, to } : {};
    if (kind === 'session') {
      const r = state.sessionStore(store);
      const a = ranged ? await r.findSessions(key, from, to) : await r.fetch(key);
      const sessions = a.sessions.map((s) => ({ ...s, value: show(s.value) }));
      if (o.json) out(`${JSON.stringify({ ...head, ...range, sessions, stamp: a.stamp })}\n`);
      else {
        out(`${store} ${keyText}: ${sessions.length} sessions, ${stampText(a.stamp)}\n`);
        const rows = sessions.map((s) => [iso(s.start), iso(s.end), JSON.stringify(s.value)]);
        if (rows.length > 0) out(`${table([['start', 'end', 'value'], ...rows])}\n`);
      }
      return sessions.length === 0 ? 3 : 0;
    }
    const a = await state.windowStore(store).fetch(key, from, to);
    const windows = a.windows.map((w) => ({ ...w, value: show(w.value) }));
    if (o.json) out(`${JSON.stringify({ ...head, from, to, windows, stamp: a.stamp })}\n`);
    else {
      out(
        `${store} ${keyText}: ${windows.length} windows starting in [${iso(from)}, ${iso(to)}], ${stampText(a.stamp)}\n`,
      );
      const rows = windows.map((w) => [
        iso(w.start),
        iso(w.end),
        JSON.stringify(w.value),
        iso(w.timestamp),
        w.final ? 'yes' : 'no',
      ]);
      if (rows.length > 0) out(`${table([['start', 'end', 'value', 'timestamp', 'final'], ...rows])}\n`);
    }
    return windows.length === 0 ? 3 : 0;
  } finally {
    redis.disconnect();
  }
}

/**
 * The topology's state reader. A store in the fence space of a topic a pattern matched needs the
 * cluster's topics to resolve it (TopologyStateOptions.topics): `--topics`, or else the topics listed
 * from `--brokers` (as the running processor lists them at start; RF_KAFKA_UNAVAILABLE / RF_KAFKA_AUTH
 * when the brokers cannot be asked, the message naming --topics as the way round).
 */
async function stateOf(
  TopologyState: typeof import('../index.js').TopologyState,
  built: import('../topology/types.js').BuiltTopology,
  redis: import('../index.js').TopologyStateOptions['redis'],
  topics: readonly string[] | undefined,
  kafka: ReturnType<typeof kafkaClient>,
) {
  try {
    return new TopologyState(built, { redis, ...(topics === undefined ? {} : { topics }) });
  } catch (err) {
    if (topics !== undefined || !RedfenceError.is(err, 'RF_INVALID_OPTIONS')) throw err;
  }
  return new TopologyState(built, { redis, topics: await listTopics(kafka) });
}

/** The cluster's topic names, from the brokers of `client`. */
async function listTopics(client: ReturnType<typeof kafkaClient>): Promise<string[]> {
  const { KafkaAdmin } = await import('../kafka/admin.js');
  const { commonProperties } = await import('../kafka/client-config.js');
  const admin = new KafkaAdmin(commonProperties({ ...client, groupId: 'redfence-state' }));
  try {
    return await admin.listTopics();
  } catch (err) {
    if (!(err instanceof RedfenceError)) throw err;
    throw new RedfenceError(
      err.code,
      `${err.message} (listing the topics a pattern source matches; or pass --topics with the cluster's topic names)`,
      { cause: err },
    );
  } finally {
    await admin.close();
  }
}
