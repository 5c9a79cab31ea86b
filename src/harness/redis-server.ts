/**
 * A redis-server of one's own: a child process on a free (or given) port of 127.0.0.1 and its own
 * directory, never a shared server (it refuses a port that already answers). Optionally persistent (AOF
 * with `appendfsync always`, so a SIGKILL loses no acknowledged write and a restart on the same
 * directory brings every key back) and optionally a replica. Ready once it logs that it accepts
 * connections and answers PING.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Child, type Exit } from './child.js';
import { pollUntil } from './poll.js';
import { freePort } from './port.js';

/**
 * Sends one inline command and resolves with what `parse` makes of the reply so far once it returns
 * non-null (undefined: give up), or undefined when unreachable or past the timeout.
 */
function ask(
  port: number,
  command: string,
  parse: (reply: string) => string | undefined | null,
  timeoutMs: number,
): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let reply = '';
    const done = (r: string | undefined): void => {
      socket.destroy();
      resolve(r);
    };
    socket.setTimeout(timeoutMs, () => done(undefined));
    socket.on('error', () => done(undefined));
    socket.on('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (d) => {
      reply += d.toString('latin1');
      const r = parse(reply);
      if (r !== null) done(r);
    });
  });
}

/** Sends one inline command; resolves with the first reply line, or undefined when unreachable. */
export function redisCommand(port: number, command: string, timeoutMs = 1000): Promise<string | undefined> {
  return ask(
    port,
    command,
    (reply) => {
      const i = reply.indexOf('\r\n');
      return i >= 0 ? reply.slice(0, i) : null;
    },
    timeoutMs,
  );
}

/** The text of `INFO <section>`, or undefined when unreachable. */
export function redisInfo(port: number, section: string, timeoutMs = 1000): Promise<string | undefined> {
  return redisBulk(port, `INFO ${section}`, timeoutMs);
}

/** The text of a command answering one bulk string (INFO, CLUSTER NODES), or undefined when unreachable. */
export function redisBulk(port: number, command: string, timeoutMs = 1000): Promise<string | undefined> {
  return ask(
    port,
    command,
    (reply) => {
      const m = /^\$(\d+)\r\n/.exec(reply);
      if (m && reply.length >= m[0].length + Number(m[1])) return reply.slice(m[0].length);
      return reply.startsWith('-') ? undefined : null;
    },
    timeoutMs,
  );
}

export interface RedisServerOptions {
  /** Default: a free port, chosen at the first start and kept for restarts. */
  port?: number;
  /** Default: a new temporary directory, removed by `stop()`. */
  dir?: string;
  /** AOF with appendfsync always (default false: a restart starts empty). */
  persistent?: boolean;
  /** Start as a replica of this port. */
  replicaOf?: number;
  /** Default `redis-server` on the PATH. */
  binary?: string;
  /** Bound on start-up (default 20 s). */
  startTimeoutMs?: number;
  /** More configuration as command-line arguments (cluster mode, TLS, ACL users). */
  args?: readonly string[];
}

export class RedisServer {
  readonly #options: RedisServerOptions;
  #port: number;
  #dir: string | undefined;
  #ownDir = false;
  #child: Child | undefined;

  constructor(options: RedisServerOptions = {}) {
    this.#options = { ...options };
    this.#port = options.port ?? 0;
    this.#dir = options.dir;
  }

  /** 0 until the first start when no port was given. */
  get port(): number {
    return this.#port;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.#port}`;
  }

  get dir(): string | undefined {
    return this.#dir;
  }

  get pid(): number {
    return this.#child?.pid ?? -1;
  }

  get running(): boolean {
    return this.#child?.alive ?? false;
  }

  /** Starts the server (refusing a port that already answers) and waits until it answers PING. */
  async start(): Promise<void> {
    if (this.running) throw new Error(`redis-server on ${this.#port} is already running`);
    if (this.#port === 0) this.#port = await freePort();
    if (this.#dir === undefined) {
      this.#dir = await mkdtemp(join(tmpdir(), 'redfence-redis-'));
      this.#ownDir = true;
    } else await mkdir(this.#dir, { recursive: true });
    if ((await redisCommand(this.#port, 'PING', 300)) !== undefined)
      throw new Error(`port ${this.#port} already answers: refusing to use someone else's Redis`);
    const persistent = this.#options.persistent ?? false;
    const replicaOf = this.#options.replicaOf;
    const child = new Child({
      name: `redis-server :${this.#port}`,
      command: this.#options.binary ?? 'redis-server',
      args: [
        '--port',
        String(this.#port),
        '--bind',
        '127.0.0.1',
        '--dir',
        this.#dir,
        '--save',
        '',
        '--daemonize',
        'no',
        '--maxmemory-policy',
        'noeviction',
        '--appendonly',
        persistent ? 'yes' : 'no',
        ...(persistent ? ['--appendfsync', 'always'] : []),
        ...(replicaOf === undefined ? [] : ['--replicaof', '127.0.0.1', String(replicaOf)]),
        ...(this.#options.args ?? []),
      ],
    });
    this.#child = child;
    const timeoutMs = this.#options.startTimeoutMs ?? 20_000;
    try {
      await child.ready({ label: 'ready to accept connections', output: /Ready to accept/, timeoutMs });
      await pollUntil(
        `redis-server on ${this.#port} to answer PING`,
        async () => {
          if (!child.alive) throw new Error(`redis-server on ${this.#port} exited${child.tail()}`);
          return (await redisCommand(this.#port, 'PING', 300)) === '+PONG';
        },
        timeoutMs,
        50,
      );
    } catch (err) {
      await child.kill();
      throw err;
    }
  }

  /** Starts again as a replica of `port` (after a failover made that one the primary); undefined: as a primary. */
  async restartAsReplicaOf(port: number | undefined): Promise<void> {
    this.#options.replicaOf = port;
    await this.start();
  }

  /** SIGKILL, waiting for the exit; undefined when it was not running (it exited before). */
  async kill(): Promise<Exit | undefined> {
    if (!this.running) return undefined;
    return this.#child?.kill();
  }

  /** SIGSTOP / SIGCONT: the server hangs without closing connections. */
  signal(sig: NodeJS.Signals): void {
    this.#child?.signal(sig);
  }

  /** A clean shutdown (SIGTERM: Redis writes what it must and exits); restartable with `start()`. */
  async shutdown(timeoutMs = 10_000): Promise<void> {
    if (!this.running) return;
    const { forced } = (await this.#child?.terminate(timeoutMs)) ?? { forced: false };
    if (forced)
      throw new Error(`redis-server on ${this.#port} did not exit within ${timeoutMs} ms of SIGTERM`);
  }

  /** Ends it for good (SIGKILL if it lingers) and removes its directory when it made it. */
  async stop(): Promise<void> {
    if (this.running) await this.#child?.terminate(5000);
    if (this.#ownDir && this.#dir !== undefined) await rm(this.#dir, { recursive: true, force: true });
  }

  tail(): string {
    return this.#child?.tail() ?? '';
  }
}

/** A started RedisServer. */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const server = new RedisServer(options);
  await server.start();
  return server;
}
