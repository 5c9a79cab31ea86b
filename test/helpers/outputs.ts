/**
 * Checks what a topic holds key by key, never as a total (a lost output and a duplicate elsewhere
 * cancel in a total). Read the topic with readToEnd (test/helpers/kafka.ts) first. Messages name keys
 * and items (counts), never record values.
 */
import assert from 'node:assert/strict';
import type { Msg, ReadRecord } from './kafka.js';

export interface PerKeyOptions {
  /**
   * 'none' (default, exactly-once): each key holds exactly its expected items, each once.
   * 'allowed' (at-least-once): each expected item at least once, and nothing else.
   */
  duplicates?: 'none' | 'allowed';
  /** The items must come in offset order as listed (default: compared regardless of order). */
  ordered?: boolean;
}

const nRecords = (n: number) => `${n} record${n === 1 ? '' : 's'}`;
const show = (key: string | null) => (key === null ? 'the null key' : `key ${JSON.stringify(key)}`);

/**
 * What is wrong with `records` against `expected` (key -> the items its records must carry, `item`
 * reading one from a record), or undefined when nothing is: a key missing, an item missing, duplicated
 * or not expected, a key not expected at all. Names the first bad key in `expected`'s order.
 */
export function perKeyProblem<I extends number | string>(
  records: readonly ReadRecord[],
  item: (r: ReadRecord) => I,
  expected: ReadonlyMap<string, readonly I[]>,
  options: PerKeyOptions = {},
): string | undefined {
  const got = new Map<string | null, I[]>();
  for (const r of records) {
    const list = got.get(r.key) ?? [];
    if (list.length === 0) got.set(r.key, list);
    list.push(item(r));
  }
  for (const [key, want] of expected) {
    const have = got.get(key) ?? [];
    if (have.length === 0 && want.length > 0) return `${show(key)}: no records (want ${want.length})`;
    const wanted = new Map<I, number>();
    for (const w of want) wanted.set(w, (wanted.get(w) ?? 0) + 1);
    const seen = new Map<I, number>();
    for (const h of have) {
      const n = (seen.get(h) ?? 0) + 1;
      seen.set(h, n);
      const allowed = wanted.get(h) ?? 0;
      if (allowed === 0) return `${show(key)}: ${h} not expected`;
      if (n > allowed && options.duplicates !== 'allowed')
        return `${show(key)}: ${h} duplicated (${n} times, want ${allowed})`;
    }
    for (const [w, n] of wanted) {
      const s = seen.get(w) ?? 0;
      if (s === 0 || (s < n && options.duplicates !== 'allowed'))
        return `${show(key)}: ${w} missing (${nRecords(have.length)}, want ${want.length})`;
    }
    if (options.ordered) {
      const firstSeen = options.duplicates === 'allowed' ? [...new Set(have)] : have;
      const at = firstSeen.findIndex((h, i) => h !== want[i]);
      if (at >= 0) return `${show(key)}: out of order at #${at + 1} (want ${want[at]}, got ${firstSeen[at]})`;
    }
  }
  for (const [key, have] of got)
    if (key === null || !expected.has(key)) return `${show(key)}: not expected (${nRecords(have.length)})`;
  return undefined;
}

/** perKeyProblem as an assertion: fails with `what: <problem>`. */
export function assertPerKey<I extends number | string>(
  what: string,
  records: readonly ReadRecord[],
  item: (r: ReadRecord) => I,
  expected: ReadonlyMap<string, readonly I[]>,
  options: PerKeyOptions = {},
): void {
  const problem = perKeyProblem(records, item, expected, options);
  if (problem !== undefined) assert.fail(`${what}: ${problem}`);
}

/** key -> 1..n from key -> n: the counts a key's running totals go through. */
export function countsUpTo(n: ReadonlyMap<string, number>): Map<string, number[]> {
  return new Map([...n].map(([key, count]) => [key, Array.from({ length: count }, (_, i) => i + 1)]));
}

/** The count of a running-total output: its JSON `count` field, or the value itself as an integer. */
export function countOf(r: ReadRecord): number {
  const v = JSON.parse(r.value ?? 'null') as unknown;
  const n = typeof v === 'object' && v !== null ? (v as { count?: unknown }).count : v;
  if (!Number.isSafeInteger(n))
    throw new Error(`record at ${r.partition}/${r.offset} of ${show(r.key)} carries no count`);
  return n as number;
}

/**
 * `count` orders over `customers` customers: order i goes to customer c-(7i mod customers), its amount
 * is 1 + (131i mod 997). Returns the messages and each customer's amounts in order.
 */
export function customerOrders(
  count: number,
  customers: number,
): { messages: Msg[]; amounts: Map<string, number[]> } {
  const messages: Msg[] = [];
  const amounts = new Map<string, number[]>();
  for (let i = 0; i < count; i++) {
    const customer = `c-${(i * 7) % customers}`;
    const amount = 1 + ((i * 131) % 997);
    const list = amounts.get(customer) ?? [];
    if (list.length === 0) amounts.set(customer, list);
    list.push(amount);
    messages.push({ key: customer, value: JSON.stringify({ customer, amount }) });
  }
  return { messages, amounts };
}
