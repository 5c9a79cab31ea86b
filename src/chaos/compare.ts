/**
 * `redfence chaos <module>`: a user's processor has no model the verifier knows, so its faulted run is
 * checked against a fault-free run of the same module over the same input. The two runs have their own
 * topics, store, group and redis-server; each one's results are read back (snapshot) and compared by key.
 *
 * - state: every key's stored value (the `v` field of `rf:{<store>:<key>}`, byte for byte; a key stored
 *   in one run only is a difference);
 * - outputs, as multisets of (key, value) per key: exactly-once (read_committed) equal; at-least-once
 *   (read_uncommitted) the same distinct values per key, each at least as often as in the reference run
 *   (more: the duplicates the mode allows, counted; fewer, or a value never in the reference: a difference);
 * - dead letters, as multisets of (key, value, `redfence-reason`), under the same rule;
 * - the input topics hold the same number of records, and each run's group committed its end offsets.
 *
 * Like the verifier, this reads Kafka and Redis itself: nothing from the processing path.
 */
import { createHash } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { type ConnectionConfig, readTopic } from './kafka.js';

export type CompareMode = 'exactly-once' | 'at-least-once';

/** One run's results. */
export interface Snapshot {
  inputRecords: number;
  committed: number;
  endOffsets: number;
  /** Key as in the Redis key name (raw, or `#` + base64url SHA-256) -> its stored value. */
  state: Map<string, string>;
  /** Output key -> value -> how many times. */
  outputs: Map<string, Map<string, number>>;
  outputRecords: number;
  deadLetters: Map<string, Map<string, number>>;
  deadLetterRecords: number;
}

export interface SnapshotOptions {
  brokers: string[];
  kafkaConfig?: ConnectionConfig;
  redisUrl?: string;
  clusterPorts?: number[];
  mode: CompareMode;
  input: string;
  output: string;
  deadLetter: string;
  group: string;
  store: string;
  readTimeoutMs?: number;
}

const shown = (b: Buffer | null | undefined): string => {
  if (b === null || b === undefined) return '<null>';
  const text = b.toString('utf8');
  return Buffer.from(text, 'utf8').equals(b) ? text : `<base64:${b.toString('base64')}>`;
};

const add = (m: Map<string, Map<string, number>>, key: string, value: string) => {
  let values = m.get(key);
  if (!values) {
    values = new Map();
    m.set(key, values);
  }
  values.set(value, (values.get(value) ?? 0) + 1);
};

/** Reads one run's input size, outputs, dead letters, state and committed offsets. */
export async function snapshot(o: SnapshotOptions): Promise<Snapshot> {
  const timeout = o.readTimeoutMs ?? 300_000;
  const isolation = o.mode === 'exactly-once' ? 'read_committed' : 'read_uncommitted';
  const s: Snapshot = {
    inputRecords: 0,
    committed: 0,
    endOffsets: 0,
    state: new Map(),
    outputs: new Map(),
    outputRecords: 0,
    deadLetters: new Map(),
    deadLetterRecords: 0,
  };
  const input = await readTopic(
    o.brokers,
    o.input,
    'read_uncommitted',
    () => s.inputRecords++,
    timeout,
    o.kafkaConfig,
  );
  await readTopic(
    o.brokers,
    o.output,
    isolation,
    (m) => {
      s.outputRecords++;
      add(s.outputs, shown(m.key), shown(m.value));
    },
    timeout,
    o.kafkaConfig,
  );
  await readTopic(
    o.brokers,
    o.deadLetter,
    isolation,
    (m) => {
      s.deadLetterRecords++;
      const reason = m.headers.get('redfence-reason')?.at(-1)?.toString('utf8') ?? '<no reason>';
      add(s.deadLetters, shown(m.key), `${reason}: ${shown(m.value)}`);
    },
    timeout,
    o.kafkaConfig,
  );

  const redis: Redis | Cluster = o.clusterPorts
    ? new Cluster(
        o.clusterPorts.map((port) => ({ host: '127.0.0.1', port })),
        { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 3 } },
      )
    : new Redis(o.redisUrl ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 3, lazyConnect: true });
  try {
    await redis.connect();
    const prefix = `rf:{${o.store}:`;
    const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        cursor = next;
        for (const k of keys) {
          if (!k.endsWith('}')) continue; // epoch and pending-index keys
          const v = await redis.hgetBuffer(k, 'v');
          s.state.set(k.slice(prefix.length, -1), v === null ? '<no value>' : shown(v));
        }
      } while (cursor !== '0');
    }
  } finally {
    redis.disconnect();
  }

  const { ChaosKafka } = await import('./kafka.js');
  const kafka = new ChaosKafka(o.brokers, o.kafkaConfig);
  try {
    const offsets = await kafka.committedOffsets(o.group, o.input);
    for (const [p, end] of input.ends) {
      s.endOffsets += end;
      const c = offsets.get(p) ?? -1;
      if (c === end) s.committed += end;
      else s.committed += Math.max(0, Math.min(c, end));
    }
  } finally {
    await kafka.close();
  }
  return s;
}

export type DifferenceCheck = 'input' | 'state' | 'output' | 'dead-letter' | 'offsets';

export interface Difference {
  check: DifferenceCheck;
  /** The key it concerns (the user's key when it can be told; undefined for a whole-run difference). */
  key?: string;
  message: string;
}

export interface Comparison {
  mode: CompareMode;
  reference: Snapshot;
  faulted: Snapshot;
  /** Keys with state in either run, and of them those whose state differs. */
  stateKeys: number;
  /** Distinct keys with outputs in either run. */
  outputKeys: number;
  /** At-least-once: outputs (and dead letters) of the faulted run beyond the reference's count. */
  duplicateOutputs: number;
  duplicateDeadLetters: number;
  /** The first 20 differences of each check. */
  differences: Difference[];
  /** Differences per check, including those not listed. */
  counts: Map<DifferenceCheck, number>;
  /** Every key with a difference (the number, not a list). */
  keysDiffering: number;
}

const MAX_LISTED = 20;

const clip = (s: string, n = 120) => (s.length <= n ? s : `${s.slice(0, n)}... (${s.length} chars)`);

/** `#` + base64url SHA-256 of the key bytes -> key: how hashed Redis key names are shown. */
export function hashedNames(keys: Iterable<string>): Map<string, string> {
  const m = new Map<string, string>();
  for (const k of keys) m.set(`#${createHash('sha256').update(k, 'utf8').digest('base64url')}`, k);
  return m;
}

/** Compares the faulted run with the reference run, key by key. */
export function compare(mode: CompareMode, reference: Snapshot, faulted: Snapshot): Comparison {
  const differences: Difference[] = [];
  const counts = new Map<DifferenceCheck, number>();
  const keys = new Set<string>();
  const differ = (check: DifferenceCheck, key: string | undefined, message: string) => {
    const n = (counts.get(check) ?? 0) + 1;
    counts.set(check, n);
    if (key !== undefined) keys.add(key);
    if (n <= MAX_LISTED) differences.push({ check, ...(key === undefined ? {} : { key }), message });
  };
  if (reference.inputRecords !== faulted.inputRecords)
    differ(
      'input',
      undefined,
      `${faulted.inputRecords} input records in the faulted run, ${reference.inputRecords} in the reference run`,
    );
  for (const [run, s] of [
    ['reference', reference],
    ['faulted', faulted],
  ] as const)
    if (s.committed !== s.endOffsets)
      differ('offsets', undefined, `${run} run: committed ${s.committed} of ${s.endOffsets} input offsets`);

  const names = hashedNames([...reference.outputs.keys(), ...faulted.outputs.keys()]);
  const stateKeys = new Set([...reference.state.keys(), ...faulted.state.keys()]);
  for (const k of [...stateKeys].sort()) {
    const key = names.get(k) ?? k;
    const a = reference.state.get(k);
    const b = faulted.state.get(k);
    if (a === b) continue;
    if (a === undefined)
      differ(
        'state',
        key,
        `${key}: stored ${clip(String(b))} in the faulted run, nothing in the reference run`,
      );
    else if (b === undefined)
      differ('state', key, `${key}: no state in the faulted run, ${clip(a)} in the reference run`);
    else differ('state', key, `${key}: ${clip(b)} in the faulted run, ${clip(a)} in the reference run`);
  }

  const multisets = (check: 'output' | 'dead-letter', ref: Snapshot['outputs'], got: Snapshot['outputs']) => {
    let extra = 0;
    const all = new Set([...ref.keys(), ...got.keys()]);
    for (const key of [...all].sort()) {
      const a = ref.get(key) ?? new Map<string, number>();
      const b = got.get(key) ?? new Map<string, number>();
      const wrong: string[] = [];
      for (const value of new Set([...a.keys(), ...b.keys()])) {
        const x = a.get(value) ?? 0;
        const y = b.get(value) ?? 0;
        if (x === y) continue;
        if (mode === 'at-least-once' && x > 0 && y > x) {
          extra += y - x;
          continue;
        }
        wrong.push(`${clip(value, 60)} (faulted ${y}, reference ${x})`);
      }
      if (wrong.length > 0)
        differ(
          check,
          key,
          `${key}: ${wrong.length} ${check === 'output' ? 'output' : 'dead-letter'} value${wrong.length === 1 ? '' : 's'} differ: ${wrong.slice(0, 2).join('; ')}${wrong.length > 2 ? '; ...' : ''}`,
        );
    }
    return { keys: all.size, extra };
  };
  const outputs = multisets('output', reference.outputs, faulted.outputs);
  const dead = multisets('dead-letter', reference.deadLetters, faulted.deadLetters);
  return {
    mode,
    reference,
    faulted,
    stateKeys: stateKeys.size,
    outputKeys: outputs.keys,
    duplicateOutputs: outputs.extra,
    duplicateDeadLetters: dead.extra,
    differences,
    counts,
    keysDiffering: keys.size,
  };
}
