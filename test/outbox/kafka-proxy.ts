/**
 * A TCP proxy in front of one Kafka broker that clients can be cut off from: it reads the Kafka protocol
 * and rewrites the broker addresses in Metadata and FindCoordinator responses to its own, so a client
 * bootstrapped through it never learns the broker's advertised address and every connection it makes
 * (producer, transaction coordinator, consumers) goes through the proxy. `cut()` drops every connection
 * and refuses new ones until `restore()`: the broker is away for these clients only, and stays up for
 * everyone else. `failProduce()` turns the broker's answers to produce requests for one topic into a
 * given error code: a broker error of any code, on a real broker. `holdProduce()` keeps the broker's
 * answers to produce requests (and every later answer on the same connection, in order) from the client
 * until `releaseProduce()`: the records are written, the client waits for their acknowledgements.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

const PRODUCE = 0;
const LIST_OFFSETS = 2;
const METADATA = 3;
const FIND_COORDINATOR = 10;

function uvarint(b: Buffer, at: number): [number, number] {
  let v = 0;
  let shift = 0;
  for (let i = at; ; i++) {
    const x = b[i] as number;
    v |= (x & 0x7f) << shift;
    if ((x & 0x80) === 0) return [v >>> 0, i + 1];
    shift += 7;
  }
}

function writeUvarint(n: number): Buffer {
  const out: number[] = [];
  let v = n >>> 0;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return Buffer.from(out);
}

/** Skips a (nullable) string; returns the offset after it. */
function skipString(b: Buffer, at: number, flexible: boolean): number {
  if (flexible) {
    const [n, next] = uvarint(b, at);
    return next + Math.max(0, n - 1);
  }
  const n = b.readInt16BE(at);
  return at + 2 + Math.max(0, n);
}

function skipTags(b: Buffer, at: number): number {
  let [n, i] = uvarint(b, at);
  while (n-- > 0) {
    const [, afterTag] = uvarint(b, i);
    const [size, afterSize] = uvarint(b, afterTag);
    i = afterSize + size;
  }
  return i;
}

class Rewriter {
  readonly #host: Buffer;
  readonly #port: number;
  /** Topic -> the error code its partitions' produce responses are given. */
  readonly failures = new Map<string, number>();
  /** Topic -> the error code its partitions' ListOffsets responses are given. */
  readonly offsetFailures = new Map<string, number>();
  /** Responses whose error codes were replaced. */
  replaced = 0;
  constructor(host: string, port: number) {
    this.#host = Buffer.from(host);
    this.#port = port;
  }

  /** A Produce response with the error code of every partition of a failing topic replaced (in place). */
  #produce(version: number, body: Buffer): Buffer {
    const flexible = version >= 9;
    const count = (i: number): [number, number] => {
      if (!flexible) return [body.readInt32BE(i), i + 4];
      const [c, next] = uvarint(body, i);
      return [c - 1, next];
    };
    let [topics, i] = count(flexible ? skipTags(body, 0) : 0);
    while (topics-- > 0) {
      const start = i;
      i = skipString(body, i, flexible);
      const nameAt = flexible ? uvarint(body, start)[1] : start + 2;
      const code = this.failures.get(body.subarray(nameAt, i).toString());
      let partitions: number;
      [partitions, i] = count(i);
      while (partitions-- > 0) {
        i += 4; // index
        if (code !== undefined) body.writeInt16BE(code, i);
        i += 2 + 8; // error_code, base_offset
        if (version >= 2) i += 8; // log_append_time_ms
        if (version >= 5) i += 8; // log_start_offset
        if (version >= 8) {
          let errors: number;
          [errors, i] = count(i);
          while (errors-- > 0) {
            i = skipString(body, i + 4, flexible);
            if (flexible) i = skipTags(body, i);
          }
          i = skipString(body, i, flexible); // error_message
        }
        if (flexible) i = skipTags(body, i);
      }
      if (flexible) i = skipTags(body, i);
    }
    return body;
  }

  /** A ListOffsets response with the error code of every partition of a failing topic replaced (in place). */
  #listOffsets(version: number, body: Buffer): Buffer {
    const flexible = version >= 6;
    const count = (i: number): [number, number] => {
      if (!flexible) return [body.readInt32BE(i), i + 4];
      const [c, next] = uvarint(body, i);
      return [c - 1, next];
    };
    let i = flexible ? skipTags(body, 0) : 0;
    if (version >= 2) i += 4; // throttle_time_ms
    let topics: number;
    [topics, i] = count(i);
    while (topics-- > 0) {
      const start = i;
      i = skipString(body, i, flexible);
      const nameAt = flexible ? uvarint(body, start)[1] : start + 2;
      const code = this.offsetFailures.get(body.subarray(nameAt, i).toString());
      let partitions: number;
      [partitions, i] = count(i);
      while (partitions-- > 0) {
        i += 4; // partition_index
        if (code !== undefined) {
          body.writeInt16BE(code, i);
          this.replaced++;
        }
        i += 2; // error_code
        if (version === 0) {
          let n: number;
          [n, i] = count(i);
          i += 8 * n;
        } else i += 16; // timestamp, offset
        if (version >= 4) i += 4; // leader_epoch
        if (flexible) i = skipTags(body, i);
      }
      if (flexible) i = skipTags(body, i);
    }
    return body;
  }

  /** `host` then `port` at `at`, replaced: returns [the new bytes, the offset after the old ones]. */
  #address(b: Buffer, at: number, flexible: boolean): [Buffer, number] {
    const afterHost = skipString(b, at, flexible);
    const port = Buffer.alloc(4);
    port.writeInt32BE(this.#port);
    const len = flexible ? writeUvarint(this.#host.length + 1) : Buffer.alloc(2);
    if (!flexible) len.writeInt16BE(this.#host.length);
    return [Buffer.concat([len, this.#host, port]), afterHost + 4];
  }

  /** The response body (after the correlation id) with the broker addresses replaced. */
  rewrite(api: number, version: number, body: Buffer): Buffer {
    if (api === PRODUCE) return this.failures.size === 0 ? body : this.#produce(version, Buffer.from(body));
    if (api === LIST_OFFSETS)
      return this.offsetFailures.size === 0 ? body : this.#listOffsets(version, Buffer.from(body));
    const parts: Buffer[] = [];
    let copied = 0;
    const replace = (at: number, flexible: boolean): number => {
      parts.push(body.subarray(copied, at));
      const [bytes, next] = this.#address(body, at, flexible);
      parts.push(bytes);
      copied = next;
      return next;
    };
    if (api === METADATA) {
      const flexible = version >= 9;
      let i = flexible ? skipTags(body, 0) : 0;
      if (version >= 3) i += 4; // throttle_time_ms
      let n: number;
      if (flexible) {
        const [c, next] = uvarint(body, i);
        n = c - 1;
        i = next;
      } else {
        n = body.readInt32BE(i);
        i += 4;
      }
      for (let k = 0; k < n; k++) {
        i += 4; // node_id
        i = replace(i, flexible);
        if (version >= 1) i = skipString(body, i, flexible); // rack
        if (flexible) i = skipTags(body, i);
      }
    } else if (api === FIND_COORDINATOR) {
      const flexible = version >= 3;
      let i = flexible ? skipTags(body, 0) : 0;
      if (version >= 1) i += 4; // throttle_time_ms
      if (version < 4) {
        i += 2; // error_code
        if (version >= 1) i = skipString(body, i, flexible); // error_message
        i += 4; // node_id
        replace(i, flexible);
      } else {
        const [c, next] = uvarint(body, i);
        i = next;
        for (let k = 0; k < c - 1; k++) {
          i = skipString(body, i, true); // key
          i += 4; // node_id
          i = replace(i, true);
          i += 2; // error_code
          i = skipString(body, i, true); // error_message
          i = skipTags(body, i);
        }
      }
    } else return body;
    parts.push(body.subarray(copied));
    return Buffer.concat(parts);
  }
}

export class KafkaProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #down = false;
  #port = 0;
  #rewriter: Rewriter | undefined;
  #holding = false;
  /** Per connection: writes the answers it holds back to the client. */
  readonly #flushers = new Set<() => void>();
  /** Connections the proxy accepted (refused ones included). */
  connections = 0;
  /** Answers to produce requests held back since the last releaseProduce(). */
  heldProduce = 0;

  constructor(target: { host: string; port: number }) {
    this.#server = createServer((client) => {
      this.connections++;
      if (this.#down || this.#rewriter === undefined) {
        client.destroy();
        return;
      }
      const rewriter = this.#rewriter;
      const upstream = connect(target.port, target.host);
      this.#sockets.add(client).add(upstream);
      const asked = new Map<number, [number, number]>();
      let up = Buffer.alloc(0);
      client.on('data', (d: Buffer) => {
        upstream.write(d);
        up = Buffer.concat([up, d]);
        while (up.length >= 4 && up.length >= 4 + up.readInt32BE(0)) {
          const size = up.readInt32BE(0);
          asked.set(up.readInt32BE(8), [up.readInt16BE(4), up.readInt16BE(6)]);
          up = up.subarray(4 + size);
        }
      });
      let down = Buffer.alloc(0);
      const held: Buffer[] = [];
      const flush = (): void => {
        for (const b of held.splice(0)) client.write(b);
      };
      this.#flushers.add(flush);
      upstream.on('data', (d: Buffer) => {
        down = Buffer.concat([down, d]);
        while (down.length >= 4 && down.length >= 4 + down.readInt32BE(0)) {
          const size = down.readInt32BE(0);
          const frame = down.subarray(4, 4 + size);
          down = down.subarray(4 + size);
          const correlation = frame.readInt32BE(0);
          const req = asked.get(correlation);
          asked.delete(correlation);
          const body =
            req === undefined ? frame.subarray(4) : rewriter.rewrite(req[0], req[1], frame.subarray(4));
          const head = Buffer.alloc(8);
          head.writeInt32BE(body.length + 4, 0);
          head.writeInt32BE(correlation, 4);
          const answer = Buffer.concat([head, body]);
          if (this.#holding && (held.length > 0 || req?.[0] === PRODUCE)) {
            if (req?.[0] === PRODUCE) this.heldProduce++;
            held.push(answer);
          } else client.write(answer);
        }
      });
      const end = (): void => {
        this.#flushers.delete(flush);
        client.destroy();
        upstream.destroy();
        this.#sockets.delete(client);
        this.#sockets.delete(upstream);
      };
      client.on('close', end).on('error', end);
      upstream.on('close', end).on('error', end);
    });
  }

  /** Listens on 127.0.0.1 on a free port; resolves with it. */
  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(0, '127.0.0.1', () => resolve());
    });
    const a = this.#server.address();
    this.#port = typeof a === 'object' && a !== null ? a.port : 0;
    this.#rewriter = new Rewriter('127.0.0.1', this.#port);
    return this.#port;
  }

  get address(): string {
    return `127.0.0.1:${this.#port}`;
  }

  /** Drops every connection and refuses new ones until restore(). */
  cut(): void {
    this.#down = true;
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
  }

  restore(): void {
    this.#down = false;
  }

  /**
   * From now on the broker's answer to every produce to `topic` says `code` (the records were written,
   * the client is told they were refused: in a transaction they are aborted). undefined: answers pass.
   */
  failProduce(topic: string, code: number | undefined): void {
    if (code === undefined) this.#rewriter?.failures.delete(topic);
    else this.#rewriter?.failures.set(topic, code);
  }

  /** Holds back the broker's answers to produce requests (see the file comment) until releaseProduce(). */
  holdProduce(): void {
    this.#holding = true;
  }

  /** Hands every held answer to its client, in order, and holds nothing more. */
  releaseProduce(): void {
    this.#holding = false;
    this.heldProduce = 0;
    for (const f of this.#flushers) f();
  }

  /** From now on the broker's answers to ListOffsets (watermarks) for `topic` say `code`; undefined: they pass. */
  failListOffsets(topic: string, code: number | undefined): void {
    if (code === undefined) this.#rewriter?.offsetFailures.delete(topic);
    else this.#rewriter?.offsetFailures.set(topic, code);
  }

  /** Partition answers whose error code was replaced so far (ListOffsets). */
  get replacedOffsets(): number {
    return this.#rewriter?.replaced ?? 0;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
