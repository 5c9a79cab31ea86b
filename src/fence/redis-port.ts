/**
 * The narrow slice of a Redis client the fence needs. ioredis' `Redis` and `Cluster` provide these
 * methods at runtime (ioredis generates a `<command>Buffer` variant of every command, which its
 * typings omit for some); another client can be adapted by implementing these five. Cluster clients
 * must route each call by its first key (ioredis does).
 *
 * (`callBuffer('EVALSHA', ...)` is avoided on purpose: with ioredis' enableAutoPipelining it loses the
 * command name.)
 */
export type RedisArg = string | Buffer | number;

export interface FenceRedis {
  evalshaBuffer(sha: string, numKeys: number, ...args: RedisArg[]): Promise<unknown>;
  evalBuffer(script: string, numKeys: number, ...args: RedisArg[]): Promise<unknown>;
  hgetallBuffer(key: string): Promise<Record<string, Buffer>>;
  zadd(key: string, ...args: RedisArg[]): Promise<unknown>;
  zrangeBuffer(key: string, ...args: RedisArg[]): Promise<Buffer[]>;
}

const METHODS = ['evalshaBuffer', 'evalBuffer', 'hgetallBuffer', 'zadd', 'zrangeBuffer'] as const;

/** Returns the client as a {@link FenceRedis}, or the name of the first method it lacks. */
export function asFenceRedis(client: unknown): FenceRedis | string {
  for (const m of METHODS) {
    if (typeof (client as Record<string, unknown> | null)?.[m] !== 'function') return m;
  }
  return client as FenceRedis;
}
