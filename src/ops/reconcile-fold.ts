/**
 * The expected side of reconciliation: each key's state and fence recomputed from the input log with
 * the processor's own definition, by the same rules the processor applies (src/processor/plan.ts and
 * apply.ts): a null key, a key that does not hash (murmur2) to its record's partition, a value the
 * decode throws on, or a user function that throws, is dead-lettered and never changes state (a
 * reducer's throw still moves the key's fence: the fence keeps it as a dead letter); an
 * operation goes through the pure reference model of the fence (src/fence/model.ts), so REJECT moves
 * the fence and keeps the value, and integer arithmetic is exact 64-bit; a reducer's state is stored as
 * its JSON text and read back with JSON.parse, as the processor does between batches.
 */
import type { ProcessorDefinition, RecordMeta } from '../definition/definition.js';
import { decideApply, type ModelState } from '../fence/model.js';
import type { Operation } from '../fence/types.js';
import type { KeySpace } from '../keys/keys.js';
import { partitionFor } from '../partitioner/index.js';

/** One input record as read from the log. */
export interface LogRecord {
  readonly partition: number;
  readonly offset: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly timestamp: string;
}

/** A record that reached state: its offset, the value after it, and what rebuilds it. */
export interface Step {
  readonly offset: number;
  /** The value text after this record (null: no value, e.g. after a delete). */
  readonly value: string | null;
  readonly input: unknown;
  readonly meta: RecordMeta;
}

/** Everything the log says about one key. */
export interface KeyHistory {
  /** The form of the key in its Redis key name (raw, or `#` + digest). */
  readonly id: string;
  readonly partition: number;
  /** Applied records in offset order (dead-lettered ones are left out). */
  readonly steps: Step[];
}

/** How many records were dead-lettered without touching state, by reason. */
export type DeadCounts = Record<'null-key' | 'wrong-partition' | 'undecodable' | 'processing-error', number>;

type Definition = ProcessorDefinition<unknown, unknown>;

function jsonDecode(value: Buffer | null): unknown {
  return JSON.parse(value?.toString('utf8') ?? 'null') as unknown;
}

/** The value after applying `input` to `before` (text), or 'dead' when the user function throws. */
export async function applyOne(
  def: Definition,
  before: { value: string | null } | null,
  input: unknown,
  meta: RecordMeta,
): Promise<{ value: string | null } | 'dead'> {
  if (def.reduce !== undefined) {
    let red: Awaited<ReturnType<typeof def.reduce>>;
    try {
      const current: unknown = before?.value == null ? null : JSON.parse(before.value);
      red = await def.reduce(current, input, meta);
    } catch {
      return 'dead';
    }
    return { value: JSON.stringify(red.state) };
  }
  let op: Operation;
  try {
    op = await (def.operation as NonNullable<typeof def.operation>)(input, meta);
  } catch {
    return 'dead';
  }
  const state: ModelState | null =
    before === null
      ? null
      : // offset -1: the model applies any offset after it (a doubled record is applied again)
        { value: before.value, partition: meta.partition, offset: -1, epoch: 0, pending: new Map() };
  try {
    const { state: after } = decideApply(
      state,
      {
        partition: meta.partition,
        epoch: 0,
        committedOffset: -1,
        records: [{ offset: meta.offset, operation: op }],
      },
      { mode: 'cluster' },
    );
    return { value: after?.value ?? null };
  } catch {
    // an operation the fence would refuse (RF_INVALID_ARGUMENT): the record is dead-lettered
    return 'dead';
  }
}

/** Folds input records, partition by partition in offset order, into each key's expected history. */
export class ExpectedFold {
  readonly keys = new Map<string, KeyHistory>();
  readonly dead: DeadCounts = { 'null-key': 0, 'wrong-partition': 0, undecodable: 0, 'processing-error': 0 };
  records = 0;
  readonly #decode: (value: Buffer | null, meta: RecordMeta) => unknown;

  constructor(
    readonly definition: Definition,
    readonly keySpace: KeySpace,
    readonly partitionCount: number,
  ) {
    this.#decode = definition.decode ?? jsonDecode;
  }

  /** Adds one record; records of a partition must come in offset order. */
  async add(r: LogRecord): Promise<void> {
    this.records++;
    if (r.key === null) {
      this.dead['null-key']++;
      return;
    }
    if (partitionFor(r.key, this.partitionCount) !== r.partition) {
      this.dead['wrong-partition']++;
      return;
    }
    const key = r.key.toString('utf8');
    const meta: RecordMeta = {
      topic: this.definition.input,
      partition: r.partition,
      offset: r.offset,
      key,
      timestamp: r.timestamp,
    };
    let input: unknown;
    try {
      input = await this.#decode(r.value, meta);
    } catch {
      this.dead.undecodable++;
      return;
    }
    const id = this.keySpace.keyId(key);
    const h = this.keys.get(id) ?? { id, partition: r.partition, steps: [] };
    const last = h.steps.at(-1);
    const before = last === undefined ? null : { value: last.value };
    const after = await applyOne(this.definition, before, input, meta);
    if (after === 'dead') {
      this.dead['processing-error']++;
      // a reducer's throw is kept by the fence: the value unchanged, the fence moved past it
      // (docs/guarantees.md, "A reducer that throws"); an operation's is never sent
      if (this.definition.reduce === undefined) return;
      if (h.steps.length === 0) this.keys.set(id, h);
      h.steps.push({ offset: r.offset, value: before?.value ?? null, input, meta });
      return;
    }
    if (h.steps.length === 0) this.keys.set(id, h);
    h.steps.push({ offset: r.offset, value: after.value, input, meta });
  }
}

/**
 * The values the key would hold at step `upTo` had one of its records (at or before it) been applied
 * twice, each with the offset of the doubled record. Quadratic in the key's steps: callers bound it.
 */
export async function doubledValues(
  def: Definition,
  h: KeyHistory,
  upTo: number,
): Promise<Array<{ offset: number; value: string | null }>> {
  const out: Array<{ offset: number; value: string | null }> = [];
  for (let twice = 0; twice <= upTo; twice++) {
    let cur: { value: string | null } | null =
      twice === 0 ? null : { value: h.steps[twice - 1]?.value ?? null };
    let ok = true;
    for (let i = twice; i <= upTo && ok; i++) {
      const s = h.steps[i] as Step;
      for (let n = i === twice ? 2 : 1; n > 0; n--) {
        const next = await applyOne(def, cur, s.input, s.meta);
        if (next === 'dead') {
          ok = false;
          break;
        }
        cur = next;
      }
    }
    if (ok && cur !== null) out.push({ offset: h.steps[twice]?.offset ?? -1, value: cur.value });
  }
  return out;
}
