/**
 * A TCP proxy on 127.0.0.1 in front of one target, for faults on a connection: `cut()` drops every
 * connection (clients reconnect through it), `switchTo()` points new connections at another target
 * (a failover), and `holdFrom()` keeps what clients send from a matching chunk on until `release()` (a
 * server that stops answering in the middle of a call, with the call sent).
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface Target {
  host: string;
  port: number;
}

export class TcpProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #pending: Array<() => void> = [];
  #target: Target;
  #held = false;
  #match: RegExp | undefined;
  #port = 0;
  /** Bytes clients sent while held. */
  heldBytes = 0;

  constructor(target: Target) {
    this.#target = target;
    this.#server = createServer((client) => {
      const upstream = connect(this.#target.port, this.#target.host);
      this.#sockets.add(client).add(upstream);
      client.on('data', (d) => {
        if (!this.#held && this.#match?.test(d.toString('latin1'))) this.#held = true;
        if (!this.#held) upstream.write(d);
        else {
          this.heldBytes += d.length;
          this.#pending.push(() => upstream.write(d));
        }
      });
      upstream.on('data', (d) => client.write(d));
      const end = (): void => {
        client.destroy();
        upstream.destroy();
        this.#sockets.delete(client);
        this.#sockets.delete(upstream);
      };
      client.on('close', end).on('error', end);
      upstream.on('close', end).on('error', end);
    });
  }

  /** Listens on 127.0.0.1 (`port` 0: a free one); resolves with the port. */
  async listen(port = 0): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, '127.0.0.1', () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    const address = this.#server.address();
    this.#port = typeof address === 'object' && address !== null ? address.port : 0;
    return this.#port;
  }

  /** 0 until `listen()`. */
  get port(): number {
    return this.#port;
  }

  get target(): Target {
    return this.#target;
  }

  /** Drops every open connection (both sides). */
  cut(): void {
    for (const s of this.#sockets) s.destroy();
  }

  /** New connections go to `target`; open ones are dropped, so their clients reconnect there. */
  switchTo(target: Target): void {
    this.#target = target;
    this.cut();
  }

  /**
   * Forwards as usual until a client sends a chunk matching `match`, then holds that chunk and all that
   * any client sends after it until `release()`.
   */
  holdFrom(match: RegExp): void {
    this.#match = match;
    this.heldBytes = 0;
  }

  release(): void {
    this.#held = false;
    this.#match = undefined;
    for (const f of this.#pending.splice(0)) f();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
