/**
 * The key names of a key call, on {@link KeySpace}: the fence hash `rf:[t=<tenant>:]{<app>:<key>}` (the
 * state key of KeySpace with the app as its store; in a fence space, `{<app>@<space>:<key>}`) and a window of store s starting at `start`,
 * `<fence hash>:w:<s>:<start>`, the session hash of store s, `<fence hash>:s:<s>`, and the window hash of
 * store s (one field per window start: sliding windows), `<fence hash>:h:<s>`, in the same slot;
 * a partition's index of windows by close time (emit-final),
 * `rf:[t=<tenant>:]{<app>:<topic>:<partition>}:close:<s>`, in the partition's slot; the application's
 * layout marker `rf:[t=<tenant>:]{<app>}:layout`, in its own slot.
 */
import { type KeyEncoding, KeySpace } from '../keys/index.js';

export interface StoreKeysOptions {
  /** The processor's store name or the topology's application id: `[A-Za-z0-9_.-]{1,64}`. */
  readonly app: string;
  readonly tenant?: string;
  readonly keyEncoding?: KeyEncoding;
  /**
   * The fence space (a topic name): fence hashes `rf:[t=<tenant>:]{<app>@<space>:<key>}` and the keys
   * beside them; absent, the app's own `{<app>:<key>}`. A topology's stateful sub-topologies after the
   * first each have their own (src/topology/run/plan.ts), so a key's fence holds one offset order each.
   */
  readonly space?: string;
}

export class StoreKeys {
  readonly space: KeySpace;

  constructor(options: StoreKeysOptions) {
    this.space = new KeySpace({
      store: options.app,
      ...(options.tenant === undefined ? {} : { tenant: options.tenant }),
      ...(options.keyEncoding === undefined ? {} : { keyEncoding: options.keyEncoding }),
      ...(options.space === undefined ? {} : { space: options.space }),
    });
  }

  /** The fence hash of a fence key. */
  fence(key: string | Uint8Array): string {
    return this.space.state(key);
  }

  /** The session hash of store `store` (one field per session), given the fence hash's name. */
  session(fence: string, store: number): string {
    return `${fence}:s:${store}`;
  }

  /** The window hash of store `store` (one field per window start), given the fence hash's name. */
  windowHash(fence: string, store: number): string {
    return `${fence}:h:${store}`;
  }

  /** A partition's index of the windows of store `store` by close time (emit-final; its own slot). */
  closeIndex(topic: string, partition: number, store: number): string {
    return this.space.closeIndex(topic, partition, store);
  }

  /** The application's layout marker (src/store/layout.ts), in its own slot `{<app>}`. */
  layout(): string {
    const t = this.space.tenant;
    return `${t === undefined ? 'rf:' : `rf:t=${t}:`}{${this.space.store}}:layout`;
  }

  /** A partition's epoch key (the partition fence's: it exists once the application took the partition). */
  epoch(topic: string, partition: number): string {
    return this.space.epoch(topic, partition);
  }

  /** The key of one window of store `store`, given the fence hash's name. */
  window(fence: string, store: number, start: number): string {
    return `${fence}:w:${store}:${start}`;
  }
}
