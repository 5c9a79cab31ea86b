/**
 * The benchmark's own redis-server: spawned as a child on a private port, ready when PING answers
 * (polled), stopped at the end. Refuses to start when the port is already taken, so it never talks
 * to (or kills) someone else's Redis.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RedisProcess {
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

/** Sends one inline PING; true when the server answers +PONG. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let reply = '';
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      reply += d.toString('latin1');
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
  });
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export async function startRedis(port: number, binary = '/usr/bin/redis-server'): Promise<RedisProcess> {
  if (await ping(port)) throw new Error(`port ${port} already answers PING: refusing to use it`);
  const dir = mkdtempSync(join(tmpdir(), 'redfence-bench-'));
  const child = spawn(
    binary,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'no',
      '--dir',
      dir,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let log = '';
  const keep = (d: Buffer): void => {
    log = (log + d.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  // Last resort: never leave the child behind when this process exits.
  const onExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', onExit);

  const stop = async (): Promise<void> => {
    process.removeListener('exit', onExit);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited(child);
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop();
      throw new Error(`redis-server exited before answering PING:\n${log}`);
    }
    if (await ping(port)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer PING within 10 s:\n${log}`);
    }
    await sleep(20);
  }
  if (child.pid === undefined) throw new Error('redis-server has no pid');
  return { port, pid: child.pid, stop };
}
