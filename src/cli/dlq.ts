/**
 * `redfence dlq <stats|show|replay> --topic <dead-letter topic>`: reads a dead-letter topic written by
 * redfence, Spring Kafka, Kafka Connect or Kafka Streams (src/dead-letter/decode.ts) from its earliest
 * offset to its end, without a consumer group commit, and counts it (`stats`), prints it (`show`) or
 * sends the matching dead letters back (`replay`, idempotent through markers in Redis:
 * src/dead-letter/replay.ts, docs/dead-letters.md). Every option is checked before any connection.
 * Exit 0: done; 1: a failure while running (or dead letters that name no topic to replay to);
 * 2: a bad option, a missing topic, a refused login.
 */

import { REASONS as DEAD_LETTER_REASONS } from '../dead-letter/headers.js';
import type { DltRecord } from '../dead-letter/read.js';
import type { DlqFilter } from '../dead-letter/replay.js';
import { RedfenceError } from '../errors/index.js';
import { BROKERS_OPTION, kafkaClient } from './connection.js';
import { KAFKA_OPTIONS, type KafkaValues } from './kafka-options.js';
import {
  helpText,
  Invalid,
  listOption,
  numberOption,
  type OptionSpec,
  type Parsed,
  parseOptions,
  switchOption,
  type Table,
  textOption,
} from './options.js';
import { REDIS_OPTIONS } from './redis-options.js';

const TOPIC = /^[A-Za-z0-9._-]{1,249}$/;
/** The reasons, from the dead-letter header table (one home). */
const REASONS: readonly string[] = [...DEAD_LETTER_REASONS];

/** An instant: ISO 8601 (`2026-12-01T10:00:00Z`) or milliseconds since the epoch. */
function instantOption(description: string): OptionSpec<number, false> {
  const allowed = 'an ISO 8601 time (2026-12-01T10:00:00Z) or milliseconds since the epoch';
  return {
    kind: 'value',
    placeholder: '<time>',
    description,
    allowed,
    default: undefined,
    parse: (raw) => {
      const n = /^\d{1,15}$/.test(raw)
        ? Number(raw)
        : /^\d{4}-\d\d-\d\d/.test(raw)
          ? Date.parse(raw)
          : Number.NaN;
      return Number.isFinite(n) ? n : new Invalid(` must be ${allowed}, got "${raw}"`);
    },
  };
}

/** `<from>-<to>` (inclusive), `<from>-` or one offset. */
function rangeOption(): OptionSpec<{ from?: bigint; to?: bigint }, false> {
  const allowed = '<from>-<to>, <from>- or <offset> (non-negative integers, from <= to)';
  return {
    kind: 'value',
    placeholder: '<range>',
    description: 'source offsets, inclusive (with --partition, or across every source partition)',
    allowed,
    default: undefined,
    parse: (raw) => {
      const m = /^(\d{1,19})(?:(-)(\d{1,19})?)?$/.exec(raw);
      if (m === null) return new Invalid(` must be ${allowed}, got "${raw}"`);
      const from = BigInt(m[1] as string);
      const to = m[2] === undefined ? from : m[3] === undefined ? undefined : BigInt(m[3]);
      if (to !== undefined && to < from) return new Invalid(` must be ${allowed}, got "${raw}"`);
      return to === undefined ? { from } : { from, to };
    },
  };
}

const COMMON = {
  topic: textOption('<topic>', {
    description: 'the dead-letter topic to read',
    env: 'REDFENCE_DLQ_TOPIC',
    allowed: 'a Kafka topic name (1-249 of [A-Za-z0-9._-])',
    pattern: TOPIC,
  }),
  brokers: BROKERS_OPTION,
  reason: listOption('<list>', {
    description: "only these redfence reasons (other writers' dead letters have none)",
    allowed: REASONS.join(', '),
    item: (s) => (REASONS.includes(s) ? s : undefined),
  }),
  exception: listOption('<list>', {
    description: 'only these exception classes (full or simple names)',
    allowed: 'class names, e.g. org.apache.kafka.connect.errors.DataException or DataException',
    item: (s) => (/^[A-Za-z_$][\w$.]*$/.test(s) ? s : undefined),
  }),
  since: instantOption('only dead letters written at or after this time'),
  until: instantOption('only dead letters written before this time'),
  key: textOption('<text>', { description: 'only records with this key (UTF-8)' }),
  'source-topic': textOption('<topic>', {
    description: 'only records from this source (original) topic',
    allowed: 'a Kafka topic name (1-249 of [A-Za-z0-9._-])',
    pattern: TOPIC,
  }),
  partition: numberOption('<n>', { description: 'only records from this source partition', min: 0 }),
  offsets: rangeOption(),
  json: switchOption({ description: 'print JSON (the default when stdout is not a terminal)' }),
  timeout: numberOption('<ms>', {
    description: 'Kafka connect and metadata timeout, and the most a read may go without progress',
    default: 30_000,
    min: 100,
  }),
  ...KAFKA_OPTIONS,
};

const SHOW = {
  ...COMMON,
  limit: numberOption('<n>', { description: 'print at most this many records', default: 100, min: 1 }),
  values: switchOption({ description: 'also print each record value (UTF-8, or base64: when binary)' }),
};

const REPLAY = {
  ...COMMON,
  to: textOption('<topic>', {
    description: "send to this topic instead of each record's original topic",
    allowed: 'a Kafka topic name (1-249 of [A-Za-z0-9._-])',
    pattern: TOPIC,
  }),
  'dry-run': switchOption({ description: 'report what would be sent; send nothing, write no marker' }),
  'include-state-applied': switchOption({
    description:
      'also send dead letters whose state changes were made (redfence-state-applied: a count would count them twice)',
  }),
  rate: numberOption('<n/s>', {
    description: 'at most this many records per second',
    min: 0.01,
    fraction: true,
  }),
  batch: numberOption('<n>', {
    description: 'records per produce call and marker write (the most a crash can duplicate)',
    default: 100,
    min: 1,
    max: 10_000,
  }),
  'marker-ttl': numberOption('<s>', {
    description: 'how long a replayed marker is kept in Redis (after it, a replay sends the record again)',
    default: 30 * 86_400,
    min: 60,
  }),
  ...REDIS_OPTIONS,
};

const ABOUT = {
  stats: [
    'redfence dlq stats --topic <dlt> [filters] [options]',
    'Counts the dead letters by writer, reason, exception class, source partition and hour.',
    COMMON,
  ],
  show: [
    'redfence dlq show --topic <dlt> [filters] [options]',
    'Prints the dead letters with their headers decoded (values only with --values).',
    SHOW,
  ],
  replay: [
    'redfence dlq replay --topic <dlt> [filters] [--to <topic>] [--dry-run] [--rate n] [options]',
    'Sends the matching dead letters to their original topic (or --to), with lineage headers, once each:\na marker per dead letter in Redis (docs/dead-letters.md). Dead letters whose state changes were made\n(redfence-state-applied: true) are left out unless --include-state-applied. Exit 1 when some name no\ntopic to go to.',
    REPLAY,
  ],
} as const satisfies Record<string, readonly [string, string, Table]>;

export const DLQ_HELP = `Usage: redfence dlq <stats|show|replay> --topic <dlt> [options]

Reads a dead-letter topic written by redfence, Spring Kafka, Kafka Connect or Kafka Streams.
${Object.entries(ABOUT)
  .map(([k, [, about]]) => `  ${k.padEnd(7)} ${about.split('\n')[0]}`)
  .join('\n')}

Filters (all subcommands): --reason, --exception, --since, --until, --key, --source-topic,
--partition, --offsets.
Each subcommand's --help lists its options.
`;

const invalid = (m: string) => new RedfenceError('RF_INVALID_OPTIONS', m);

type CommonValues = {
  topic: string | undefined;
  brokers: string[];
  reason: string[] | undefined;
  exception: string[] | undefined;
  since: number | undefined;
  until: number | undefined;
  key: string | undefined;
  'source-topic': string | undefined;
  partition: number | undefined;
  offsets: { from?: bigint; to?: bigint } | undefined;
  timeout: number;
};

function filterOf(o: CommonValues): DlqFilter {
  const f: DlqFilter = {};
  if (o.reason !== undefined) f.reasons = o.reason;
  if (o.exception !== undefined) f.exceptions = o.exception;
  if (o.since !== undefined) f.since = o.since;
  if (o.until !== undefined) f.until = o.until;
  if (o.since !== undefined && o.until !== undefined && o.until <= o.since)
    throw invalid('--until must be after --since');
  if (o.key !== undefined) f.key = o.key;
  if (o['source-topic'] !== undefined) f.sourceTopic = o['source-topic'];
  if (o.partition !== undefined) f.sourcePartition = o.partition;
  if (o.offsets?.from !== undefined) f.offsetFrom = o.offsets.from;
  if (o.offsets?.to !== undefined) f.offsetTo = o.offsets.to;
  return f;
}

function bytes(b: Buffer | null): string | null {
  if (b === null) return null;
  const t = b.toString('utf8');
  return Buffer.from(t, 'utf8').equals(b) ? t : `base64:${b.toString('base64')}`;
}

const plain = (v: unknown) => (typeof v === 'bigint' ? v.toString() : v);

/** A progress bar on stderr when it is a terminal (and not --json). */
function progressBar(enabled: boolean): ((done: number, total: number) => void) | undefined {
  if (!enabled) return undefined;
  return (done, total) => {
    const width = 30;
    const full = total === 0 ? width : Math.round((done / total) * width);
    process.stderr.write(`\r[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${done}/${total}`);
    if (done >= total) process.stderr.write('\n');
  };
}

/** What every subcommand works with, once its options are checked. */
interface DlqRun {
  topic: string;
  client: ReturnType<typeof kafkaClient>;
  json: boolean;
  parsed: Parsed<Table>;
  /** Reads the topic to its end, calling `onRecord` for each dead letter the filters match. */
  read: (onRecord: (r: DltRecord) => void) => Promise<unknown>;
  out: (s: string) => void;
}

export async function dlq(args: readonly string[], out: (s: string) => void): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
    out(DLQ_HELP);
    return sub === undefined ? 2 : 0;
  }
  if (!Object.hasOwn(ABOUT, sub))
    throw invalid(`unknown subcommand "${sub}": stats, show or replay (redfence dlq --help)`);
  const [usage, about, table] = ABOUT[sub as keyof typeof ABOUT];
  const parsed = parseOptions(table as Table, rest);
  if (parsed.help) {
    out(helpText(usage, about, table));
    return 0;
  }
  if (parsed.positionals.length > 0) throw invalid(`unexpected arguments ${parsed.positionals.join(' ')}`);
  const o = parsed.values as unknown as CommonValues & KafkaValues;
  if (o.topic === undefined)
    throw invalid(`--topic <dead-letter topic> is required (redfence dlq ${sub} --help)`);
  const topic = o.topic;
  const filter = filterOf(o);
  const client = kafkaClient(o, 'redfence-dlq');
  const json =
    parsed.sources.json === undefined ? process.stdout.isTTY !== true : parsed.values.json === true;
  const { matches } = await import('../dead-letter/replay.js');
  const { readDeadLetters } = await import('../dead-letter/read.js');
  const read = (onRecord: (r: DltRecord) => void) =>
    readDeadLetters({
      client,
      topic,
      timeoutMs: o.timeout,
      onRecord: (r) => (matches(r, filter) ? onRecord(r) : undefined),
    });
  const run: DlqRun = { topic, client, json, parsed, read, out };
  if (sub === 'stats') return stats(run);
  if (sub === 'show') return show(run);
  return replayDeadLetters(run);
}

/** `dlq stats`: counts by writer, reason, exception class, source partition and hour. */
async function stats({ topic, json, read, out }: DlqRun): Promise<number> {
  const { DlqCounter } = await import('../dead-letter/replay.js');
  const counter = new DlqCounter();
  await read((r) => counter.add(r));
  const s = counter.stats;
  if (json) {
    out(`${JSON.stringify({ topic, ...s })}\n`);
    return 0;
  }
  const lines = [
    `dead-letter topic ${topic}: ${s.total} records (${s.unrecognised} without dead-letter headers)`,
  ];
  for (const [title, t] of [
    ['writer', s.byScheme],
    ['reason', s.byReason],
    ['exception class', s.byException],
    ['source partition', s.bySourcePartition],
    ['hour (UTC)', s.byHour],
  ] as const) {
    lines.push(`by ${title}:`);
    for (const [k, n] of Object.entries(t).sort((a, b) => b[1] - a[1]))
      lines.push(`  ${String(n).padStart(8)}  ${k}`);
  }
  out(`${lines.join('\n')}\n`);
  return 0;
}

/** `dlq show`: up to --limit dead letters, headers decoded (values with --values). */
async function show({ json, parsed, read, out }: DlqRun): Promise<number> {
  const v = parsed.values as unknown as { limit: number; values: boolean };
  const { headersForDisplay } = await import('../dead-letter/decode.js');
  let shown = 0;
  await read((r) => {
    if (shown >= v.limit) return;
    shown++;
    const { problems, ...info } = r.info ?? { problems: [] as string[] };
    const row = {
      partition: r.partition,
      offset: r.offset,
      timestamp: r.timestamp >= 0 ? new Date(r.timestamp).toISOString() : null,
      key: bytes(r.key),
      ...(v.values ? { value: bytes(r.value) } : {}),
      deadLetter:
        r.info === undefined ? null : Object.fromEntries(Object.entries(info).map(([k, x]) => [k, plain(x)])),
      ...(problems.length > 0 ? { problems } : {}),
      headers: headersForDisplay(r.headers),
    };
    out(json ? `${JSON.stringify(row)}\n` : `${JSON.stringify(row, null, 2)}\n`);
  });
  return 0;
}

/** `dlq replay`: every option checked, then Redis, then Kafka; exit 1 when some name no topic to go to. */
async function replayDeadLetters({ topic, client, json, parsed, read, out }: DlqRun): Promise<number> {
  const r = parsed.values as unknown as {
    to: string | undefined;
    'dry-run': boolean;
    'include-state-applied': boolean;
    rate: number | undefined;
    batch: number;
    'marker-ttl': number;
    'connect-timeout': number;
  };
  const { redisTarget } = await import('./redis-options.js');
  const target = redisTarget(parsed.values as never, parsed.sources as never);
  const { connectRedis, redisClient } = await import('./redis.js');
  const { jsonLogger } = await import('./log.js');
  const { replay } = await import('../dead-letter/replay.js');
  const records: DltRecord[] = [];
  const redis = await redisClient(target, jsonLogger('error', '-'));
  let producer: import('../kafka/producer.js').DeliveryProducer | undefined;
  try {
    await connectRedis(redis, target, r['connect-timeout']);
    await read((x) => records.push(x));
    if (!r['dry-run']) {
      const { DeliveryProducer } = await import('../kafka/producer.js');
      const { producerProperties } = await import('../kafka/client-config.js');
      producer = await DeliveryProducer.connect(producerProperties({ ...client, groupId: 'redfence-dlq' }));
    }
    const result = await replay(records, {
      dltTopic: topic,
      redis,
      ...(producer === undefined ? {} : { producer }),
      ...(r.to === undefined ? {} : { to: r.to }),
      dryRun: r['dry-run'],
      includeStateApplied: r['include-state-applied'],
      ...(r.rate === undefined ? {} : { rate: r.rate }),
      batch: r.batch,
      markerTtlSeconds: r['marker-ttl'],
      ...(json || process.stderr.isTTY !== true ? {} : { onProgress: progressBar(true) }),
    });
    const summary = { topic, dryRun: r['dry-run'], ...result };
    if (json) out(`${JSON.stringify(summary)}\n`);
    else
      out(
        `${r['dry-run'] ? 'would replay' : 'replayed'} ${result.published} of ${result.matched} matching dead letters` +
          ` (${result.alreadyReplayed} already replayed, ${result.noTopic} without an original topic,` +
          ` ${result.stateApplied} left out: their state changes were made, --include-state-applied sends them)` +
          `${Object.entries(result.byTopic)
            .map(([t, n]) => `\n  ${String(n).padStart(8)}  -> ${t}`)
            .join('')}\n`,
      );
    return result.noTopic > 0 ? 1 : 0;
  } finally {
    await producer?.close();
    redis.disconnect();
  }
}
