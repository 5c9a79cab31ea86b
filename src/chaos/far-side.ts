/**
 * The far side of `redfence chaos --handler`: a small HTTP server on 127.0.0.1 that the handler
 * instances call for their side effect. Every call is recorded: the record it was made for (partition
 * and offset, from headers the instance adds: src/chaos/any-handler.ts), its idempotency id (`ctx.id`),
 * the process that made it, when it arrived and when it was answered. Each call waits a random latency
 * and fails with 503 at the failure rate (no effect: the handler's retry tries it again); a call answered
 * 200 is an effect, as a real API applies it (this far side deduplicates nothing, so a second effect of
 * one record is visible).
 *
 * The instances also tell it, at {@link RETURNED_PATH}, each time a `handle` call returned (resolved):
 * answered at once, never failing, and kept apart from the calls. A record whose `handle` returned has
 * had its effect and, with `ctx.once`, its mark: an effect of that call is never in flight at a kill.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { Rng } from './rng.js';

export interface FarSideOptions {
  /** Latency of every call, uniform in [min, max] ms. */
  latencyMs: readonly [number, number];
  /** Fraction of calls answered 503 (0..1). */
  failureRate: number;
  seed: number;
}

export interface FarSideCall {
  /** Arrival order (0, 1, ...). */
  seq: number;
  /** `ctx.id` of the call (`x-chaos-id`), or the `idempotency-key` header when no record was bound. */
  id: string;
  /** The record it was made for; undefined: the call was made outside `handle`. */
  partition?: number;
  offset?: number;
  /** The process that made it (`<slot>#<generation>`). */
  instance: string;
  /** The call's own `idempotency-key` header, when it sent one. */
  idempotencyKey?: string;
  status: number;
  receivedAt: number;
  answeredAt: number;
}

/** Where an instance reports a returned `handle` call (headers as a call's: record, id, instance). */
export const RETURNED_PATH = '/__redfence_chaos/returned';

/** One returned `handle` call: the record's, in the process that ran it. */
export interface FarSideReturn {
  partition: number;
  offset: number;
  instance: string;
  /** When the report arrived (ms since the epoch). */
  at: number;
}

export class FarSide {
  readonly calls: FarSideCall[] = [];
  readonly returns: FarSideReturn[] = [];
  readonly #server: Server;
  readonly #rng: Rng;
  readonly #o: FarSideOptions;
  #url = '';

  constructor(o: FarSideOptions) {
    this.#o = o;
    this.#rng = new Rng(o.seed, 'far-side');
    this.#server = createServer((req, res) => {
      const receivedAt = Date.now();
      if (req.url === RETURNED_PATH) {
        req.resume();
        const d = describe(req);
        if (d.partition !== undefined && d.offset !== undefined)
          this.returns.push({
            partition: d.partition,
            offset: d.offset,
            instance: d.instance,
            at: receivedAt,
          });
        res.writeHead(204).end();
        return;
      }
      const seq = this.calls.length;
      const [lo, hi] = this.#o.latencyMs;
      const wait = lo + this.#rng.next() * (hi - lo);
      const fail = this.#rng.next() < this.#o.failureRate;
      req.resume(); // the body is not needed: the headers say which record
      setTimeout(() => {
        const status = fail ? 503 : 200;
        this.calls.push({ ...describe(req), seq, status, receivedAt, answeredAt: Date.now() });
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(fail ? '{"error":"injected failure"}' : '{"ok":true}');
      }, wait);
    });
    this.#server.keepAliveTimeout = 30_000;
  }

  /** The base URL (`http://127.0.0.1:<port>`), once started. */
  get url(): string {
    return this.#url;
  }

  async start(): Promise<string> {
    await new Promise<void>((res, rej) => {
      this.#server.once('error', rej);
      this.#server.listen(0, '127.0.0.1', () => res());
    });
    const addr = this.#server.address();
    if (addr === null || typeof addr === 'string') throw new Error('the far side has no TCP address');
    this.#url = `http://127.0.0.1:${addr.port}`;
    return this.#url;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((res) => this.#server.close(() => res()));
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function describe(req: IncomingMessage): Omit<FarSideCall, 'seq' | 'status' | 'receivedAt' | 'answeredAt'> {
  const partition = Number(header(req, 'x-chaos-partition'));
  const offset = Number(header(req, 'x-chaos-offset'));
  const key = header(req, 'idempotency-key');
  const bound = Number.isInteger(partition) && Number.isInteger(offset) && header(req, 'x-chaos-partition');
  return {
    id: header(req, 'x-chaos-id') ?? key ?? '',
    ...(bound ? { partition, offset } : {}),
    instance: header(req, 'x-chaos-instance') ?? '',
    ...(key === undefined ? {} : { idempotencyKey: key }),
  };
}
