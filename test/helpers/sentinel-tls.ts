/**
 * A Sentinel set of the test's own with TLS everywhere and ACL users everywhere: a primary and a replica
 * (TLS only, `user default off`, `admin` for replication and Sentinel, `redfence` with the given rules)
 * and three Sentinels (TLS only, `user default off`, the `rfsentinel` user for clients and for each
 * other). Free ports on 127.0.0.1, a temporary directory; certificates are the dev CA's
 * (dev/redis-secure.sh). `stop()` ends every process and removes the directory.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { Child } from '../../src/harness/child.js';
import { pollUntil } from '../../src/harness/poll.js';
import { freePort } from '../../src/harness/port.js';

export interface SentinelTls {
  name: string;
  dataPorts: number[];
  sentinelPorts: number[];
  passwords: { admin: string; redfence: string; sentinel: string };
  /** An admin client of a data node, or a `rfsentinel` client of a Sentinel (TLS with the dev CA). */
  admin(port: number): Redis;
  sentinel(port?: number): Redis;
  stop(): Promise<void>;
}

export async function startSentinelTls(tlsDir: string, redfenceRules: string): Promise<SentinelTls> {
  const name = 'rftls';
  const dir = mkdtempSync(join(tmpdir(), 'redfence-sentinel-tls-'));
  const pw = () => randomBytes(16).toString('hex');
  const passwords = { admin: pw(), redfence: pw(), sentinel: pw() };
  const tls = [
    'port 0',
    'bind 127.0.0.1',
    `tls-cert-file ${join(tlsDir, 'server.crt')}`,
    `tls-key-file ${join(tlsDir, 'server.key')}`,
    `tls-ca-cert-file ${join(tlsDir, 'ca.crt')}`,
    'tls-auth-clients optional',
    'tls-replication yes',
    'user default off',
  ];
  const children: Child[] = [];
  const launch = async (id: string, lines: string[], sentinel: boolean) => {
    const d = join(dir, id);
    const conf = `${d}.conf`;
    writeFileSync(conf, `${[...lines, `dir ${dir}`].join('\n')}\n`, { mode: 0o600 });
    const child = new Child({
      name: id,
      command: 'redis-server',
      args: sentinel ? [conf, '--sentinel'] : [conf],
    });
    children.push(child);
    await child.ready({
      label: `${id} ready`,
      output: sentinel ? /\+monitor master/ : /Ready to accept/,
      timeoutMs: 20_000,
    });
  };
  const ca = readFileSync(join(tlsDir, 'ca.crt'));
  const client = (port: number, o: RedisOptions) => {
    const r = new Redis({
      host: '127.0.0.1',
      port,
      tls: { ca },
      lazyConnect: true,
      maxRetriesPerRequest: 1,
      ...o,
    });
    r.on('error', () => undefined);
    return r;
  };
  const dataPorts = [await freePort(), await freePort()];
  const sentinelPorts = [await freePort(), await freePort(), await freePort()];
  const stop = async () => {
    await Promise.all(children.map((c) => c.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  const set: SentinelTls = {
    name,
    dataPorts,
    sentinelPorts,
    passwords,
    admin: (port) => client(port, { username: 'admin', password: passwords.admin }),
    sentinel: (port = sentinelPorts[0] as number) =>
      client(port, { username: 'rfsentinel', password: passwords.sentinel }),
    stop,
  };
  try {
    const [primary, replica] = dataPorts as [number, number];
    const data = (port: number) => [
      ...tls,
      `tls-port ${port}`,
      `dbfilename dump-${port}.rdb`,
      'save ""',
      'appendonly no',
      'maxmemory-policy noeviction',
      'replica-announce-ip 127.0.0.1',
      `user admin on >${passwords.admin} ~* &* +@all`,
      `user redfence on >${passwords.redfence} ${redfenceRules}`,
      'masteruser admin',
      `masterauth ${passwords.admin}`,
    ];
    await launch(`data-${primary}`, data(primary), false);
    await launch(`data-${replica}`, [...data(replica), `replicaof 127.0.0.1 ${primary}`], false);
    for (const port of sentinelPorts)
      await launch(
        `sentinel-${port}`,
        [
          ...tls,
          `tls-port ${port}`,
          `user rfsentinel on >${passwords.sentinel} +@all`,
          'sentinel announce-ip 127.0.0.1',
          `sentinel sentinel-user rfsentinel`,
          `sentinel sentinel-pass ${passwords.sentinel}`,
          `sentinel monitor ${name} 127.0.0.1 ${primary} 2`,
          `sentinel auth-user ${name} admin`,
          `sentinel auth-pass ${name} ${passwords.admin}`,
          `sentinel down-after-milliseconds ${name} 2000`,
          `sentinel failover-timeout ${name} 10000`,
        ],
        true,
      );
    await pollUntil(
      'the 3 sentinels to agree on the primary with 1 replica',
      async () => {
        for (const port of sentinelPorts) {
          const s = set.sentinel(port);
          try {
            const m = (await s.call('SENTINEL', 'MASTER', name)) as string[];
            const at = (k: string) => m[m.indexOf(k) + 1];
            if (at('num-slaves') !== '1' || at('num-other-sentinels') !== '2') return false;
          } catch {
            return false;
          } finally {
            s.disconnect();
          }
        }
        return true;
      },
      60_000,
      250,
    );
    return set;
  } catch (err) {
    await stop();
    throw err;
  }
}
