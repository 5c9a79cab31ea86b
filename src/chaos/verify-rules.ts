/**
 * The chaos verifier's checks on Kafka (src/chaos/verifier.ts runs them in order), each against the
 * input's ledger (src/chaos/verify-ledger.ts):
 * - outputs: each is exactly the bytes `{"total":T,"count":C}` of its customer after its first C valid
 *   orders (or, for a key a `repair` fault drifted, that total plus the drift: the fault's effect, counted
 *   apart); every valid order has one (its count C), exactly one in exactly-once mode;
 * - dead letters: each poison record has one (exactly one in exactly-once mode) with the right
 *   `redfence-reason` (`processing-error` for an order the reducer refuses), its original
 *   topic/partition/offset headers and its key and value bytes; no valid record is dead-lettered;
 * - offsets: the group's committed offsets equal the input's end offsets;
 * - verdicts (when scraped): no REBASE, and no more APPLY than valid records.
 */
import { type Isolation, type ReadMessage, readTopic } from './kafka.js';
import type { InputLedger, VerifyOptions, Violate } from './verify-ledger.js';

const isolationOf = (o: VerifyOptions): Isolation =>
  o.mode === 'exactly-once' ? 'read_committed' : 'read_uncommitted';

/** Reads the outputs, checking each; then that every valid order has its output. */
export async function checkOutputs(
  o: VerifyOptions,
  ledger: InputLedger,
  violate: Violate,
): Promise<{ outputRecords: number; duplicateOutputs: number; driftedOutputs: number }> {
  const { customers } = ledger;
  let outputRecords = 0;
  let duplicateOutputs = 0;
  const drift = { outputs: 0 };
  await readTopic(
    o.brokers,
    o.output,
    isolationOf(o),
    (m) => {
      outputRecords++;
      if (checkOutput(m, ledger, violate, o.drifted, drift)) duplicateOutputs++;
    },
    o.readTimeoutMs ?? 300_000,
    o.kafkaConfig,
  );
  for (const [name, l] of customers) {
    for (let c = 1; c <= l.offsets.length; c++) {
      const n = l.seen[c] as number;
      if (n === 0)
        violate(
          'output',
          `${name}: no output for order ${c} of ${l.offsets.length} (offset ${l.offsets[c - 1]})`,
          'lost output',
        );
      else if (n > 1 && o.mode === 'exactly-once')
        violate('output', `${name}: order ${c} output ${n} times under read_committed`, 'duplicate output');
    }
  }
  return { outputRecords, duplicateOutputs, driftedOutputs: drift.outputs };
}

/**
 * True when `text` is `{"total":T,"count":C}` with C the count wanted and T the fold's total plus a
 * positive multiple of `step`: an output folded on a total a `repair` fault drifted by `step` (once or
 * more) before the repair reached the key.
 */
export function foldedOnDrift(text: string, total: number, count: number, step: number): boolean {
  const m = /^\{"total":(-?\d+),"count":(\d+)\}$/.exec(text);
  if (!m || Number(m[2]) !== count || !(step > 0)) return false;
  const over = Number(m[1]) - total;
  return over > 0 && over % step === 0;
}

/** One output against its customer's fold; true when its count was already output. */
function checkOutput(
  m: ReadMessage,
  ledger: InputLedger,
  violate: Violate,
  drifted: VerifyOptions['drifted'],
  drift: { outputs: number },
): boolean {
  const name = m.key?.toString('utf8') ?? '<null>';
  const l = ledger.customers.get(name);
  const text = m.value?.toString('utf8') ?? '<null>';
  const where = `output ${m.partition}/${m.offset}`;
  if (!l || l.offsets.length === 0) {
    violate('output', `${where}: ${text} for ${name}, who has no valid order`, 'wrong output');
    return false;
  }
  const count = Number(/"count":(-?\d+)/.exec(text)?.[1] ?? Number.NaN);
  if (!Number.isInteger(count) || count < 1 || count > l.offsets.length) {
    violate('output', `${where}: ${name} ${text}: count outside 1..${l.offsets.length}`, 'wrong output');
    return false;
  }
  const want = `{"total":${l.prefix[count]},"count":${count}}`;
  if (text !== want) {
    if (drifted?.customers.has(name) && foldedOnDrift(text, l.prefix[count] as number, count, drifted.total))
      drift.outputs++;
    else violate('output', `${where}: ${name} ${text}, expected ${want}`, 'wrong output');
  }
  const seen = l.seen[count] as number;
  l.seen[count] = Math.min(65535, seen + 1);
  return seen >= 1;
}

function be(buf: Buffer | undefined, width: 4 | 8): number | undefined {
  if (!buf || buf.length !== width) return undefined;
  return width === 4 ? buf.readInt32BE(0) : Number(buf.readBigInt64BE(0));
}

/** Reads the dead letters, checking each; then that every poison record has its dead letter. */
export async function checkDeadLetters(
  o: VerifyOptions,
  ledger: InputLedger,
  violate: Violate,
): Promise<{ deadLetters: number; duplicateDeadLetters: number }> {
  let deadLetters = 0;
  let duplicateDeadLetters = 0;
  await readTopic(
    o.brokers,
    o.deadLetter,
    isolationOf(o),
    (m) => {
      deadLetters++;
      if (checkDeadLetter(o, m, ledger, violate)) duplicateDeadLetters++;
    },
    o.readTimeoutMs ?? 300_000,
    o.kafkaConfig,
  );
  for (const [where, p] of ledger.poison) {
    if (p.dl === 0) violate('dead-letter', `poison ${where} (${p.reason}) has no dead letter`);
    else if (p.dl > 1 && o.mode === 'exactly-once')
      violate('dead-letter', `poison ${where} dead-lettered ${p.dl} times under read_committed`);
  }
  return { deadLetters, duplicateDeadLetters };
}

/** One dead letter against the poison record its headers name; true when that record already had one. */
function checkDeadLetter(o: VerifyOptions, m: ReadMessage, ledger: InputLedger, violate: Violate): boolean {
  const h = (name: string) => m.headers.get(name)?.at(-1);
  const topic = h('kafka_dlt-original-topic')?.toString('utf8');
  const partition = be(h('kafka_dlt-original-partition'), 4);
  const offset = be(h('kafka_dlt-original-offset'), 8);
  const reason = h('redfence-reason')?.toString('utf8');
  const where = `dead letter ${m.partition}/${m.offset}`;
  if (topic !== o.input || partition === undefined || offset === undefined) {
    violate(
      'dead-letter',
      `${where}: original topic/partition/offset headers ${topic}/${partition}/${offset}`,
    );
    return false;
  }
  const source = ledger.poison.get(`${partition}/${offset}`);
  if (!source) {
    const key = m.key?.toString('utf8') ?? '<null>';
    violate(
      'dead-letter',
      `${where}: valid record ${partition}/${offset} (${key}) dead-lettered (reason ${reason}) and applied`,
    );
    return false;
  }
  if (reason !== source.reason)
    violate('dead-letter', `${where}: ${partition}/${offset} reason ${reason}, expected ${source.reason}`);
  if ((m.key === null) !== (source.key === null) || (m.key && source.key && !m.key.equals(source.key)))
    violate('dead-letter', `${where}: key differs from the source record's`);
  if (source.value !== null && !m.value?.equals(source.value))
    violate('dead-letter', `${where}: value differs from the source record's`);
  const duplicate = source.dl >= 1;
  source.dl++;
  return duplicate;
}

/** The group's committed offsets against the input's end offsets, partition by partition. */
export async function checkOffsets(
  o: VerifyOptions,
  ledger: InputLedger,
  violate: Violate,
): Promise<{ committed: number; endOffsets: number }> {
  const { ChaosKafka } = await import('./kafka.js');
  const kafka = new ChaosKafka(o.brokers, o.kafkaConfig);
  let committed = 0;
  let endOffsets = 0;
  try {
    const offsets = await kafka.committedOffsets(o.group, o.input);
    for (const [p, end] of ledger.ends) {
      endOffsets += end;
      const c = offsets.get(p) ?? -1;
      committed += Math.max(0, c);
      if (c !== end) violate('offsets', `partition ${p}: committed ${c}, end offset ${end}`);
    }
  } finally {
    await kafka.close();
  }
  return { committed, endOffsets };
}

/** The verdict counts scraped from the instances: no REBASE, no more APPLY than valid records. */
export function checkVerdicts(verdicts: Map<string, number>, validRecords: number, violate: Violate): void {
  const rebase = verdicts.get('REBASE') ?? 0;
  if (rebase > 0) violate('verdicts', `${rebase} REBASE verdicts: a key moved partitions`);
  const apply = verdicts.get('APPLY') ?? 0;
  if (apply > validRecords)
    violate('verdicts', `${apply} APPLY verdicts for ${validRecords} valid records`, 'double apply');
}
