/**
 * The environment works: Lua on standalone Redis, and the real cluster enforces one hash slot per
 * script (CROSSSLOT for two untagged keys, accepted with a shared hash tag).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Cluster, Redis } from 'ioredis';
import { cluster, standalone, uniqueName } from '../helpers/env.js';

const TWO_KEYS =
  "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[1]); return redis.call('GET', KEYS[2])";

describe('Redis environment', () => {
  let single: Redis;
  let multi: Cluster;
  before(() => {
    single = standalone();
    multi = cluster();
  });
  after(() => {
    single.disconnect();
    multi.disconnect();
  });

  it('runs a Lua script on standalone Redis', async () => {
    const k = uniqueName('env');
    assert.equal(await single.eval(TWO_KEYS, 2, `${k}:a`, `${k}:b`, 'v'), 'v');
    await single.del(`${k}:a`, `${k}:b`);
  });

  it('the cluster has three masters and covers every slot', async () => {
    const info = await multi.cluster('INFO');
    assert.match(String(info), /cluster_state:ok/);
    assert.match(String(info), /cluster_slots_assigned:16384/);
    assert.ok(multi.nodes('master').length >= 3);
  });

  it('the cluster rejects a script over two untagged keys in different slots with CROSSSLOT', async () => {
    const k = uniqueName('env');
    // pick two keys that hash to different slots, and ask the node that owns the first
    const a = `${k}:a`;
    let b = `${k}:b`;
    for (let i = 0; (await slot(a)) === (await slot(b)); i++) b = `${k}:b${i}`;
    // ioredis refuses such a call client-side; ask a node directly to see the server's own answer
    const node = multi.nodes('master')[0];
    assert.ok(node);
    await assert.rejects(node.eval(TWO_KEYS, 2, a, b, 'v'), /CROSSSLOT/);
  });

  it('the cluster accepts two keys that share a hash tag', async () => {
    const k = uniqueName('env');
    assert.equal(await multi.eval(TWO_KEYS, 2, `{${k}}:a`, `{${k}}:b`, 'v'), 'v');
    await multi.del(`{${k}}:a`, `{${k}}:b`);
  });

  async function slot(key: string): Promise<number> {
    return Number(await multi.cluster('KEYSLOT', key));
  }
});
