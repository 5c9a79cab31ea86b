/**
 * A KeyStore and the key call's reference model side by side: every call goes to both, and the results
 * and the stored state (fence, key-value fields, pending entries, windows with their time field, final
 * marker and expiry) must be equal.
 */
import assert from 'node:assert/strict';
import type { Cluster, Redis } from 'ioredis';
import { decideKeyCall, emptyKeyState, type KeyModelState } from '../../src/store/model.js';
import { KeyStore } from '../../src/store/store.js';
import type { EffectResult, KeyCall, KeyRecord, KeyRecordResult } from '../../src/store/types.js';

/** A pending entry as the script stores it. */
function entryText(e: { results: EffectResult[] } | { deadLetter: string }): Buffer {
  if ('deadLetter' in e) return Buffer.concat([Buffer.from('d'), Buffer.from(e.deadLetter)]);
  const parts = [Buffer.from('r')];
  for (const v of e.results) {
    if (v === null) parts.push(Buffer.from('-'));
    else if (Buffer.isBuffer(v)) parts.push(Buffer.concat([Buffer.from(`${v.length}:`), v]));
    else {
      const state = v.late ? 1 : v.value === null ? 2 : 0; // 2: deleted by a `delete` op
      const nums = [v.start, v.end, state, ...v.removed.flatMap((r) => [r.start, r.end])];
      const blob = Buffer.concat([Buffer.from(`${nums.join(',')};`), v.value ?? Buffer.alloc(0)]);
      parts.push(Buffer.concat([Buffer.from(`s${blob.length}:`), blob]));
    }
  }
  return Buffer.concat(parts);
}

export class Twin {
  readonly store: KeyStore;
  readonly model = new Map<string, KeyModelState>();
  /** Window ids (`<store>:<start>`) any call touched, by key. */
  readonly touched = new Map<string, Set<string>>();

  constructor(
    readonly redis: Redis | Cluster,
    app: string,
  ) {
    this.store = new KeyStore({ redis, app });
  }

  #modelCall(call: KeyCall): KeyRecordResult[] {
    const k = String(call.key);
    const { results, state } = decideKeyCall(this.model.get(k) ?? null, call);
    this.model.set(k, state);
    const t = this.touched.get(k) ?? new Set<string>();
    for (const r of call.records)
      for (const e of r.effects)
        if (e.kind === 'session' || (e.kind === 'final' && e.end !== undefined)) t.add(`s:${e.store}`);
        else if (e.kind === 'field' || (e.kind === 'final' && e.hash === true)) t.add(`h:${e.store}`);
        else if (e.kind !== 'kv' && e.kind !== 'note') t.add(`${e.store}:${e.start}`);
    this.touched.set(k, t);
    return results;
  }

  async call(call: KeyCall): Promise<KeyRecordResult[]> {
    const got = await this.store.call(call);
    assert.deepEqual(got, this.#modelCall(call), 'script and model disagree');
    return got;
  }

  async callMany(calls: readonly KeyCall[]): Promise<KeyRecordResult[][]> {
    const got = await this.store.callMany(calls);
    calls.forEach((c, i) => {
      assert.deepEqual(got[i], this.#modelCall(c), 'script and model disagree');
    });
    return got;
  }

  /** Asserts that Redis holds what the model holds for `key`. */
  async checkStored(key: string): Promise<void> {
    const s = this.model.get(key) ?? emptyKeyState();
    const fence = this.store.keys.fence(key);
    const h = (await this.redis.hgetallBuffer(fence)) as Record<string, Buffer>;
    const kv = new Map<number, Buffer>();
    const pending = new Map<number, Buffer>();
    for (const [f, v] of Object.entries(h)) {
      if (f === 'v') kv.set(0, v);
      else if (f.startsWith('v:')) kv.set(Number(f.slice(2)), v);
      else if (f.startsWith('#')) pending.set(Number(f.slice(1)), v);
    }
    const storedFence =
      h.p === undefined ? null : { partition: Number(h.p), offset: Number(h.o), epoch: Number(h.e) };
    assert.deepEqual(storedFence, s.fence, 'fence');
    assert.deepEqual(kv, s.kv, 'key-value fields');
    const want = new Map<number, Buffer>();
    for (const [o, e] of s.pending) want.set(o, entryText(e));
    assert.deepEqual(pending, want, 'pending entries');
    for (const id of this.touched.get(key) ?? []) {
      if (id.startsWith('s:')) {
        const name = this.store.keys.session(fence, Number(id.slice(2)));
        const got = (await this.redis.hgetallBuffer(name)) as Record<string, Buffer>;
        const m = s.sessions.get(Number(id.slice(2)));
        assert.deepEqual(new Map(Object.entries(got)), m?.fields ?? new Map(), `sessions ${id}`);
        if (m !== undefined)
          assert.equal(Number(await this.redis.pexpiretime(name)), m.expireAt, `sessions ${id} expiry`);
        continue;
      }
      if (id.startsWith('h:')) {
        const name = this.store.keys.windowHash(fence, Number(id.slice(2)));
        const got = (await this.redis.hgetallBuffer(name)) as Record<string, Buffer>;
        const m = s.hashes.get(Number(id.slice(2)));
        const entries = Object.entries(got);
        const fields = new Map(entries.filter(([f]) => !f.startsWith('f')).map(([f, v]) => [Number(f), v]));
        const finals = new Set(entries.filter(([f]) => f.startsWith('f')).map(([f]) => Number(f.slice(1))));
        assert.deepEqual(fields, m?.fields ?? new Map(), `window hash ${id}`);
        assert.deepEqual(finals, m?.finals ?? new Set(), `window hash ${id} final marks`);
        if (m !== undefined)
          assert.equal(Number(await this.redis.pexpiretime(name)), m.expireAt, `window hash ${id} expiry`);
        continue;
      }
      const [store, start] = id.split(':').map(Number) as [number, number];
      const name = this.store.keys.window(fence, store, start);
      const w = (await this.redis.hgetallBuffer(name)) as Record<string, Buffer>;
      const m = s.windows.get(id);
      if (m === undefined) {
        assert.deepEqual(w, {}, `window ${id} should not exist`);
        continue;
      }
      assert.deepEqual(w.v ?? null, m.value, `window ${id} value`);
      assert.deepEqual(w.t ?? null, m.time, `window ${id} time field`);
      assert.equal(w.f !== undefined, m.final, `window ${id} final marker`);
      assert.equal(Number(await this.redis.pexpiretime(name)), m.expireAt, `window ${id} expiry`);
    }
  }
}

/**
 * A partition's records cut into batches (sizes `cuts`, the rest last), each as one key call per key
 * (records in offset order); `commits`: each batch's call carries the committed offset of its start.
 */
export function batchCalls(
  keys: readonly (string | null | undefined)[],
  recs: readonly KeyRecord[],
  cuts: readonly number[],
  epoch: number,
  commits = false,
): KeyCall[][] {
  const out: KeyCall[][] = [];
  let from = 0;
  for (const size of [...cuts, recs.length]) {
    const to = Math.min(recs.length, from + size);
    if (to <= from) continue;
    const byKey = new Map<string, KeyRecord[]>();
    for (let i = from; i < to; i++) {
      const k = keys[i] as string;
      byKey.set(k, [...(byKey.get(k) ?? []), recs[i] as KeyRecord]);
    }
    out.push(
      [...byKey].map(([key, records]) => ({
        partition: 0,
        epoch,
        committedOffset: commits ? from : -1,
        key,
        records,
      })),
    );
    from = to;
  }
  return out;
}
