/**
 * The harness's own redis-server: a child process on a private port (never the shared services), with
 * AOF and `appendfsync always` so that a SIGKILL of the server loses no acknowledged write (every write
 * is fsynced before its reply), and `noeviction`. Restartable on the same directory: the AOF brings
 * state, fences and epochs back. Optionally a replica (`--replicaof`) for the failover fault.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { connect } from 'node:net';

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

async function pollUntil(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The text of `INFO <section>`, or undefined when unreachable. */
export function redisInfo(port: number, section: string, timeoutMs = 1000): Promise<string | undefined> {
  return ask(
    port,
    `INFO ${section}`,
    (reply) => {
      const m = /^\$(\d+)\r\n/.exec(reply);
      if (m && reply.length >= m[0].length + Number(m[1])) return reply.slice(m[0].length);
      return reply.startsWith('-') ? undefined : null;
    },
    timeoutMs,
  );
}

export interface RedisServerOptions {
  port: number;
  dir: string;
  /** AOF with appendfsync always (default true). Without it a restart starts empty. */
  persistent?: boolean;
  /** Start as a replica of this port. */
  replicaOf?: number;
  binary?: string;
}

export class ChaosRedisServer {
  readonly port: number;
  readonly dir: string;
  #options: RedisServerOptions;
  #proc: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #log = '';

  constructor(options: RedisServerOptions) {
    this.#options = { ...options };
    this.port = options.port;
    this.dir = options.dir;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.#proc !== undefined && this.#proc.exitCode === null && this.#proc.signalCode === null;
  }

  /** Starts the server (refusing a port that already answers) and waits until it answers PING. */
  async start(): Promise<void> {
    if ((await redisCommand(this.port, 'PING', 300)) !== undefined)
      throw new Error(`port ${this.port} already answers: refusing to use someone else's Redis`);
    const persistent = this.#options.persistent ?? true;
    mkdirSync(this.dir, { recursive: true });
    const args = [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--dir',
      this.dir,
      '--save',
      '',
      '--maxmemory-policy',
      'noeviction',
      '--appendonly',
      persistent ? 'yes' : 'no',
      ...(persistent ? ['--appendfsync', 'always'] : []),
      ...(this.#options.replicaOf === undefined
        ? []
        : ['--replicaof', '127.0.0.1', String(this.#options.replicaOf)]),
    ];
    const proc = spawn(this.#options.binary ?? 'redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (d: Buffer): void => {
      this.#log = (this.#log + d.toString('utf8')).slice(-4000);
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    this.#proc = proc;
    this.#exited = new Promise((r) => proc.once('exit', () => r()));
    live.add(this);
    proc.once('exit', () => live.delete(this));
    await pollUntil(
      `redis-server on ${this.port} to answer PING`,
      async () => {
        if (!this.running) throw new Error(`redis-server on ${this.port} exited: ${this.#log}`);
        const r = await redisCommand(this.port, 'PING', 300);
        return r === '+PONG';
      },
      20_000,
    );
  }

  /** Starts again as a replica of `port` (after a failover made that one the primary). */
  async restartAsReplicaOf(port: number): Promise<void> {
    this.#options.replicaOf = port;
    await this.start();
  }

  /** SIGKILL, waiting for the exit (with AOF always, nothing acknowledged is lost). */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.#proc?.kill('SIGKILL');
    await this.#exited;
  }

  /** SIGSTOP / SIGCONT: the server hangs without closing connections. */
  signal(sig: NodeJS.Signals): void {
    if (this.running) this.#proc?.kill(sig);
  }

  /** Ends it for good. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.#proc?.kill('SIGCONT');
    this.#proc?.kill('SIGTERM');
    const timer = setTimeout(() => this.#proc?.kill('SIGKILL'), 5000);
    await this.#exited;
    clearTimeout(timer);
  }

  tail(): string {
    return this.#log;
  }
}

const live = new Set<ChaosRedisServer>();
process.on('exit', () => {
  for (const s of live) s.signal('SIGKILL');
});
