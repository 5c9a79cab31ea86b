/**
 * A Redis Sentinel of one's own (`redis-server <conf> --sentinel`): a child process on a free (or given)
 * port of 127.0.0.1 with its own directory and config file (Sentinel rewrites it as it learns), watching
 * one primary under one name. Ready once it logs `+monitor master`. `call` asks it a command through a
 * short-lived connection (ioredis, so array replies such as SENTINEL REPLICAS come back parsed).
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { Child, type Exit } from './child.js';
import { freePort } from './port.js';

export interface SentinelServerOptions {
  /** The master name it monitors. */
  name: string;
  /** The primary it starts from. */
  primaryPort: number;
  /** Default 2. */
  quorum?: number;
  /** Default 1000 ms: how long the primary must not answer to be down. */
  downAfterMs?: number;
  /** Default 5000 ms. */
  failoverTimeoutMs?: number;
  /** Default: a free port. */
  port?: number;
  /** Default: a new temporary directory, removed by `stop()`. */
  dir?: string;
  /** More config lines (TLS, ACL users, auth to the data nodes). */
  config?: readonly string[];
  /** How `call` connects (TLS, credentials); default plain on the port. */
  client?: RedisOptions;
  /** Default 20 s. */
  startTimeoutMs?: number;
}

export class SentinelServer {
  readonly #o: SentinelServerOptions;
  #port: number;
  #dir: string | undefined;
  #ownDir = false;
  #child: Child | undefined;

  constructor(options: SentinelServerOptions) {
    this.#o = { ...options };
    this.#port = options.port ?? 0;
    this.#dir = options.dir;
  }

  get port(): number {
    return this.#port;
  }

  get running(): boolean {
    return this.#child?.alive ?? false;
  }

  async start(): Promise<void> {
    if (this.running) throw new Error(`sentinel on ${this.#port} is already running`);
    if (this.#port === 0) this.#port = await freePort();
    if (this.#dir === undefined) {
      this.#dir = await mkdtemp(join(tmpdir(), 'redfence-sentinel-'));
      this.#ownDir = true;
    } else await mkdir(this.#dir, { recursive: true });
    const o = this.#o;
    const conf = join(this.#dir, 'sentinel.conf');
    const lines = [
      `port ${this.#port}`,
      'bind 127.0.0.1',
      `dir ${this.#dir}`,
      'daemonize no',
      ...(o.config ?? []),
      `sentinel monitor ${o.name} 127.0.0.1 ${o.primaryPort} ${o.quorum ?? 2}`,
      `sentinel down-after-milliseconds ${o.name} ${o.downAfterMs ?? 1000}`,
      `sentinel failover-timeout ${o.name} ${o.failoverTimeoutMs ?? 5000}`,
      `sentinel parallel-syncs ${o.name} 1`,
    ];
    // after `monitor`: lines that name the master (auth-user, auth-pass) need it declared first
    const late = lines.filter((l) => /^sentinel (auth-user|auth-pass) /.test(l));
    const early = lines.filter((l) => !late.includes(l));
    await writeFile(conf, `${[...early, ...late].join('\n')}\n`, { mode: 0o600 });
    const child = new Child({
      name: `sentinel :${this.#port}`,
      command: 'redis-server',
      args: [conf, '--sentinel'],
    });
    this.#child = child;
    try {
      await child.ready({
        label: 'sentinel monitoring its master',
        output: /\+monitor master/,
        timeoutMs: o.startTimeoutMs ?? 20_000,
      });
    } catch (err) {
      await child.kill();
      throw err;
    }
  }

  /** One command through a new connection; rejects when it fails. */
  async call(...args: string[]): Promise<unknown> {
    const r = new Redis({
      host: '127.0.0.1',
      port: this.#port,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      connectTimeout: 2000,
      ...this.#o.client,
    });
    r.on('error', () => undefined);
    try {
      await r.connect();
      return await r.call(args[0] as string, ...args.slice(1));
    } finally {
      r.disconnect();
    }
  }

  /** The port of the primary it names now (undefined when it does not answer). */
  async primaryPort(): Promise<number | undefined> {
    const a = await this.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', this.#o.name).catch(() => undefined);
    return Array.isArray(a) && a.length === 2 ? Number(a[1]) : undefined;
  }

  /** The replicas it knows, each as a field -> value map (ip, port, flags, master-link-status, ...). */
  async replicas(): Promise<Array<Map<string, string>>> {
    const a = await this.call('SENTINEL', 'REPLICAS', this.#o.name).catch(() => []);
    if (!Array.isArray(a)) return [];
    return a.map((fields: unknown) => {
      const m = new Map<string, string>();
      const f = fields as string[];
      for (let i = 0; i + 1 < f.length; i += 2) m.set(f[i] as string, f[i + 1] as string);
      return m;
    });
  }

  async kill(): Promise<Exit | undefined> {
    if (!this.running) return undefined;
    return this.#child?.kill();
  }

  async stop(): Promise<void> {
    if (this.running) await this.#child?.terminate(5000);
    if (this.#ownDir && this.#dir !== undefined) await rm(this.#dir, { recursive: true, force: true });
  }

  tail(): string {
    return this.#child?.tail() ?? '';
  }
}
