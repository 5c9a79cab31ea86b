/**
 * An Idempotency-Key middleware for node:http: requests with the header and one of the guarded methods
 * (default POST and PATCH) run their handler through an {@link IdempotencyStore}, fingerprinted by
 * method, path and body. Answers: the handler's response (stored), its replay with
 * `Idempotent-Replayed: true`, 409 while the first request runs, 422 for a reused key with another
 * request, 400 for a missing header when `required`, 503 when the store is unavailable. Bodies are read
 * up to `maxBodyBytes` (413 above).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RedfenceError } from '../../errors/index.js';
import { Checker, invalid, shown } from '../../options/checks.js';
import { fingerprint, type IdempotencyStore } from './store.js';

/** What a guarded handler answers: stored as it is and replayed byte for byte. */
export interface IdempotentResponse {
  status: number;
  headers?: Record<string, string>;
  body: string;
}

export interface IdempotencyMiddlewareOptions {
  store: IdempotencyStore<IdempotentResponse>;
  /** Default `idempotency-key`. */
  header?: string;
  /** Methods guarded; others call the handler directly. Default POST and PATCH. */
  methods?: readonly string[];
  /** Refuse guarded requests without the header (400). Default false: they run unguarded. */
  required?: boolean;
  /** Default 1 MiB. */
  maxBodyBytes?: number;
}

export type IdempotentHandler = (req: IncomingMessage, body: Buffer) => Promise<IdempotentResponse>;

function problem(res: ServerResponse, status: number, title: string): void {
  res
    .writeHead(status, { 'content-type': 'application/problem+json' })
    .end(JSON.stringify({ type: 'about:blank', title, status }));
}

class TooLarge extends Error {}

async function readBody(req: IncomingMessage, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > max) throw new TooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** Wraps `handler` into a node:http request listener guarded by Idempotency-Key. */
export function createIdempotencyMiddleware(
  options: IdempotencyMiddlewareOptions,
  handler: IdempotentHandler,
): (req: IncomingMessage, res: ServerResponse) => void {
  const c = new Checker('idempotency middleware');
  const o = c.object('', options, ['store', 'header', 'methods', 'required', 'maxBodyBytes']);
  if (typeof (o.store as { run?: unknown } | undefined)?.run !== 'function') {
    throw invalid(c.where, 'option "store" must be an IdempotencyStore');
  }
  if (o.header !== undefined && (typeof o.header !== 'string' || !/^[A-Za-z0-9-]{1,64}$/.test(o.header))) {
    throw invalid(c.where, `option "header" must be a header name, got ${shown(o.header)}`);
  }
  if (
    o.methods !== undefined &&
    (!Array.isArray(o.methods) || !o.methods.every((m) => typeof m === 'string'))
  ) {
    throw invalid(c.where, `option "methods" must be an array of method names, got ${shown(o.methods)}`);
  }
  c.bool('required', o.required, false);
  const max = c.integer('maxBodyBytes', o.maxBodyBytes, 0, 2 ** 31, 1_048_576);
  const header = (options.header ?? 'idempotency-key').toLowerCase();
  const methods = (options.methods ?? ['POST', 'PATCH']).map((m) => m.toUpperCase());
  const send = (res: ServerResponse, r: IdempotentResponse, replayed: boolean): void => {
    res
      .writeHead(r.status, { ...r.headers, ...(replayed ? { 'idempotent-replayed': 'true' } : {}) })
      .end(r.body);
  };
  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const raw = req.headers[header];
    const key = Array.isArray(raw) ? raw[0] : raw;
    if (!methods.includes(req.method ?? '')) {
      send(res, await handler(req, await readBody(req, max)), false);
      return;
    }
    if (key === undefined || key === '') {
      if (options.required === true) return problem(res, 400, `missing ${header} header`);
      send(res, await handler(req, await readBody(req, max)), false);
      return;
    }
    const body = await readBody(req, max);
    const fp = fingerprint(req.method ?? '', req.url ?? '', body);
    try {
      const r = await options.store.run(key, fp, () => handler(req, body));
      send(res, r.response, r.replayed);
    } catch (err) {
      if (RedfenceError.is(err, 'RF_KIT_IDEMPOTENCY_IN_FLIGHT'))
        return problem(res, 409, 'request in flight');
      if (RedfenceError.is(err, 'RF_KIT_IDEMPOTENCY_MISMATCH'))
        return problem(res, 422, 'idempotency key reused with a different request');
      if (RedfenceError.is(err, 'RF_REDIS_UNAVAILABLE') || RedfenceError.is(err, 'RF_POSTGRES_UNAVAILABLE'))
        return problem(res, 503, 'idempotency store unavailable');
      throw err;
    }
  };
  return (req, res) => {
    serve(req, res).catch((err: unknown) => {
      if (res.headersSent) return void res.destroy();
      problem(
        res,
        err instanceof TooLarge ? 413 : 500,
        err instanceof TooLarge ? 'body too large' : 'internal error',
      );
    });
  };
}
