/**
 * Many writers and several relays under faults, in both modes: writers commit (or roll back, or lose a
 * deadlock) transactions of random length over shared aggregates while three `redfence outbox relay`
 * processes run; one relay is frozen (SIGSTOP) past its lease and woken again (a zombie that must not
 * publish), others are SIGKILLed and restarted, each while it waits to mark rows it has published (a
 * lock held by the test keeps its UPDATE waiting; pg_stat_activity shows it). Then a read_committed reader (test helpers, no relay
 * code) checks: every committed row published (exactly once in exactly-once mode), no rolled-back row,
 * and each aggregate's events (at-least-once: their first appearances) in the order their transactions
 * committed (the version each one gave the account in a business table, in the same transaction).
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Child } from '../../src/harness/index.js';
import { enqueue, type OutboxEvent } from '../../src/outbox/index.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, readToEnd } from '../helpers/kafka.js';
import { deleteTopics, type TestSchema, testSchema } from './support.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const AGGREGATES = 24;
const WRITERS = 6;
const WRITE_MS = 14_000;
const LEASE_MS = 2000;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const mode of ['exactly-once', 'at-least-once'] as const)
  describe(`outbox relays under SIGKILL and SIGSTOP (${mode})`, () => {
    let t: TestSchema;
    let prefix: string;
    let dropTopics: () => Promise<void>;
    const relays: Child[] = [];
    const ids: string[] = [];

    before(async () => {
      t = await testSchema();
      prefix = uniqueName('obxc');
      dropTopics = await createTopics([{ topic: `${prefix}.acct`, partitions: 4 }]);
    });
    after(async () => {
      await Promise.all(relays.map((r) => r.kill()));
      await dropTopics?.();
      if (t) await deleteTopics([`redfence-outbox-progress.${t.schema}.redfence_outbox`]);
      await t?.drop();
    });

    async function startRelay(i: number): Promise<Child> {
      const id = `r${i}-${Date.now().toString(36)}`;
      ids[i] = id;
      const args = [
        '--import',
        'tsx',
        'src/cli/bin.ts',
        'outbox',
        'relay',
        '--database-url',
        DATABASE_URL,
        '--schema',
        t.schema,
        '--brokers',
        KAFKA_BROKERS,
        '--mode',
        mode,
        '--topic-template',
        `${prefix}.$\{aggregatetype}`,
        '--lease',
        String(LEASE_MS),
        '--poll-interval',
        '200',
        '--batch-size',
        '200',
        '--transaction-timeout',
        '6000',
        '--relay-id',
        id,
        '--log',
        'info',
      ];
      const child = new Child({
        name: `relay-${i}`,
        command: process.execPath,
        args,
        cwd: ROOT,
        env: process.env,
      });
      await child.ready({
        label: 'relay running',
        log: (l) => l.msg === 'outbox relay running',
        timeoutMs: 60_000,
      });
      relays[i] = child;
      return child;
    }

    interface Kill {
      victim: number;
      /** The pending rows of its roles the test held locked while it was killed. */
      locked: string[];
    }

    /**
     * SIGKILLs relay `victim` while it holds published rows it has not marked: a transaction of the
     * test locks the pending rows of the victim's roles, the victim reads them, publishes them (its
     * Kafka transaction committed, or its produce acknowledged) and waits on the locks to mark them; once
     * pg_stat_activity shows its UPDATE waiting on a lock, it is killed, its sessions ended, and then
     * the locks are let go.
     */
    async function killMarking(victim: number): Promise<Kill> {
      const app = `redfence-outbox ${ids[victim]}`.slice(0, 63);
      const lock = await t.pool.connect();
      let locked: string[] = [];
      try {
        await lock.query('BEGIN');
        await pollUntil(
          `relay ${victim} waiting to mark rows it published`,
          async () => {
            if (locked.length === 0) {
              const r = await lock.query(
                `SELECT o.id FROM "${t.schema}".redfence_outbox o
                 WHERE o.state = 'pending'
                   AND o.bucket % (SELECT count(*) FROM "${t.schema}".redfence_outbox_role)::int IN
                       (SELECT role FROM "${t.schema}".redfence_outbox_role WHERE owner = $1)
                 FOR UPDATE`,
                [ids[victim]],
              );
              locked = r.rows.map((x) => String(x.id));
              if (locked.length === 0) return false;
            }
            const a = await t.pool.query(
              `SELECT count(*)::int AS n FROM pg_stat_activity
               WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE 'UPDATE%published%'`,
              [app],
            );
            return a.rows[0].n > 0;
          },
          20_000,
          10,
        );
        await relays[victim]?.kill();
        // PostgreSQL does not notice a dead client while its statement waits on a lock: the waiting
        // UPDATE would mark the rows once the locks go. End the dead relay's sessions first (what
        // client_connection_check_interval would do), so that its published rows stay unmarked.
        await t.pool.query(
          'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1',
          [app],
        );
        await pollUntil(
          `relay ${victim}'s sessions ended`,
          async () =>
            (
              await t.pool.query(
                'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
                [app],
              )
            ).rows[0].n === 0,
          10_000,
          20,
        );
      } finally {
        await lock.query('ROLLBACK').catch(() => undefined);
        lock.release();
      }
      return { victim, locked };
    }

    it('publishes every committed row, in commit order per aggregate', {
      timeout: 180_000,
    }, async (ctx) => {
      await Promise.all([0, 1, 2].map(startRelay));
      const expected = new Map<string, Array<{ id: string; v: number; i: number }>>();
      const committed = new Set<string>();
      const rolledBack = new Set<string>();
      let stop = false;
      // Each transaction also bumps its aggregates' version in a business table (as an application does):
      // the row lock orders the transactions of one account, so versions are the commit order, observed
      // without the outbox.
      await t.pool.query(`CREATE TABLE "${t.schema}".acct (id text PRIMARY KEY, v int NOT NULL)`);
      await t.pool.query(
        `INSERT INTO "${t.schema}".acct SELECT 'acc-' || g, 0 FROM generate_series(0, ${AGGREGATES - 1}) g`,
      );
      const writer = async () => {
        while (!stop) {
          const c = await t.pool.connect();
          const aggs = Array.from({ length: randomInt(1, 6) }, () => `acc-${randomInt(AGGREGATES)}`);
          let ids: string[] = [];
          try {
            await c.query('BEGIN');
            const version = new Map<string, number>();
            for (const a of new Set(aggs)) {
              const r = await c.query(`UPDATE "${t.schema}".acct SET v = v + 1 WHERE id = $1 RETURNING v`, [
                a,
              ]);
              version.set(a, r.rows[0].v as number);
            }
            const events: OutboxEvent[] = aggs.map((a, i) => ({
              aggregateType: 'acct',
              aggregateId: a,
              type: 'moved',
              payload: { v: version.get(a), i },
            }));
            ids = await enqueue(c, events, { schema: t.schema });
            await pause(randomInt(0, 25));
            if (randomInt(100) < 15) throw new Error('rollback');
            await c.query('COMMIT');
            for (const [i, id] of ids.entries()) {
              const a = aggs[i] as string;
              expected.set(a, [...(expected.get(a) ?? []), { id, v: version.get(a) as number, i }]);
              committed.add(id);
            }
          } catch {
            // a rollback, or a deadlock between two writers' accounts (PostgreSQL aborts one)
            await c.query('ROLLBACK').catch(() => undefined);
            for (const id of ids) rolledBack.add(id);
          } finally {
            c.release();
          }
        }
      };
      const writing = Promise.all(Array.from({ length: WRITERS }, writer));
      // Faults while the writers run, at random: one relay frozen past its lease (a zombie) and woken,
      // and, while it is frozen and after, the other two SIGKILLed and restarted.
      const schedule: string[] = [];
      const kills: Kill[] = [];
      const t0 = performance.now();
      await pause(randomInt(500, 2000));
      // a relay that holds roles (at first one relay may hold them all)
      const owners = await t.pool.query(
        `SELECT DISTINCT owner FROM "${t.schema}".redfence_outbox_role WHERE owner IS NOT NULL`,
      );
      const holding = [0, 1, 2].filter((i) => owners.rows.some((r) => r.owner === ids[i]));
      const frozen = holding[randomInt(holding.length)] ?? 0;
      schedule.push(`stop ${frozen}`);
      relays[frozen]?.signal('SIGSTOP');
      const wakeAt = performance.now() + LEASE_MS * 2 + randomInt(0, 1000);
      let woken = false;
      while (performance.now() - t0 < WRITE_MS - 1500) {
        await pause(randomInt(400, 1500));
        if (!woken && performance.now() >= wakeAt) {
          schedule.push(`cont ${frozen}`);
          relays[frozen]?.signal('SIGCONT');
          woken = true;
          continue;
        }
        // the zombie itself is left alive: its log must show it gave its roles up
        const candidates = [0, 1, 2].filter((i) => i !== frozen);
        const held = await t.pool.query(
          `SELECT DISTINCT owner FROM "${t.schema}".redfence_outbox_role WHERE owner = ANY($1)`,
          [candidates.map((i) => ids[i])],
        );
        const holders = candidates.filter((i) => held.rows.some((r) => r.owner === ids[i]));
        if (holders.length === 0) continue;
        const victim = holders[randomInt(holders.length)] as number;
        const kill = await killMarking(victim);
        kills.push(kill);
        schedule.push(`kill ${victim} (marking; ${kill.locked.length} rows of its roles held)`);
        await startRelay(victim);
      }
      if (!woken) {
        schedule.push(`cont ${frozen}`);
        relays[frozen]?.signal('SIGCONT');
      }
      stop = true;
      await writing;
      assert.ok(committed.size > 200, `enough committed rows (${committed.size})`);
      ctx.diagnostic(`schedule: ${schedule.join(', ')}`);
      await pollUntil(
        'every committed row marked published',
        async () => {
          const r = await t.pool.query(
            `SELECT count(*)::int AS n FROM "${t.schema}".redfence_outbox WHERE state <> 'published'`,
          );
          return r.rows[0].n === 0;
        },
        90_000,
        250,
      );
      const out = await readToEnd(`${prefix}.acct`, 90_000);
      const seen = out.map((r) => String(r.headers.id));
      if (mode === 'exactly-once')
        assert.equal(seen.length, new Set(seen).size, 'no row published twice (read_committed)');
      assert.deepEqual(new Set(seen), committed, 'exactly the committed rows');
      for (const id of rolledBack) assert.ok(!committed.has(id));
      // every kill landed on rows published and not marked: at-least-once, the next holder of the role
      // published some of them again; exactly-once, its recovery marked them from the progress record
      assert.ok(kills.length > 0, `at least one kill: ${schedule.join(', ')}`);
      const copies = new Map<string, number>();
      for (const id of seen) copies.set(id, (copies.get(id) ?? 0) + 1);
      for (const [k, kill] of kills.entries()) {
        const again = kill.locked.filter((id) => (copies.get(id) ?? 0) > 1).length;
        ctx.diagnostic(
          `kill ${k} (relay ${kill.victim}): ${kill.locked.length} rows held, ${again} published twice`,
        );
        if (mode === 'at-least-once')
          assert.ok(again > 0, `kill ${k}: a row the killed relay had published was published again`);
      }
      const got = new Map<string, string[]>();
      // at-least-once: the first appearance of each id (consumers drop repeats by id)
      const first = new Set<string>();
      for (const r of out) {
        const id = String(r.headers.id);
        if (first.has(id)) continue;
        first.add(id);
        got.set(r.key ?? '', [...(got.get(r.key ?? '') ?? []), id]);
      }
      for (const [agg, list] of expected) {
        const ids = [...list].sort((a, b) => a.v - b.v || a.i - b.i).map((e) => e.id);
        assert.deepEqual(got.get(agg), ids, `commit order of ${agg}`);
      }
      // the frozen relay woke up without its roles: it lost them or its producer was fenced
      const zombie = relays[frozen] as Child;
      assert.ok(
        zombie.log.lines.some(
          (l) => l.msg === 'outbox role lost to another relay' || /Kafka fatal/.test(l.msg ?? ''),
        ),
        `the woken relay gave its roles up:\n${zombie.tail(30)}`,
      );
    });
  });
