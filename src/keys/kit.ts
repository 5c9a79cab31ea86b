/**
 * Key names of the Redis kit (src/kit/), built on {@link KeySpace} so they follow the same rules as the
 * fence's: `rf:` prefix, a tenant scope, a hash tag, and user ids that are long, odd or personal stored
 * by a hash of their bytes.
 *
 *   base of one kit key:  rf:t=<tenant>:{<component>.<namespace>:<id>}
 *   its parts:            <base>:<part>   (e.g. `:v` value, `:g` generation, `:lease`, `:fence`)
 *
 * Every part of one kit key shares the hash tag, so a script over them stays in one Cluster slot. The
 * tenant is required: a kit key without a tenant boundary cannot be built.
 */
import { RedfenceError } from '../errors/index.js';
import { type KeyEncoding, KeySpace } from './keys.js';

/** The kit's components; each has its own key namespace. */
export type KitComponent = 'cache' | 'lock' | 'ratelimit' | 'projection';

/** What a kit call names: a tenant and an id within it. */
export interface KitKey {
  /** `[A-Za-z0-9_.-]{1,64}`; ACLs can grant `rf:t=<tenant>:*`. */
  tenant: string;
  /** The entity id (an aggregate id, a user id, a route). Hashed under `keyEncoding: 'hash'`. */
  id: string | Uint8Array;
}

export interface KitKeysOptions {
  /** `'hash'` for ids that carry personal data (never raw in key names). Default `'auto'`. */
  keyEncoding?: KeyEncoding;
}

const COMPONENTS: readonly KitComponent[] = ['cache', 'lock', 'ratelimit', 'projection'];
const PART = /^[a-z]{1,8}$/;
/** KeySpaces kept per tenant; cleared when this many (tenants are few, but never unbounded). */
const MAX_SPACES = 1024;

/** Builds the Redis key names of one kit component instance (one namespace). */
export class KitKeys {
  readonly component: KitComponent;
  readonly namespace: string;
  readonly keyEncoding: KeyEncoding;
  readonly #spaces = new Map<string, KeySpace>();

  constructor(component: KitComponent, namespace: string, options: KitKeysOptions = {}) {
    if (!COMPONENTS.includes(component)) {
      throw new RedfenceError('RF_INVALID_ARGUMENT', `unknown kit component ${JSON.stringify(component)}`);
    }
    this.component = component;
    this.keyEncoding = options.keyEncoding ?? 'auto';
    // Validates the namespace (and the encoding) with KeySpace's own rules.
    const probe = new KeySpace({ store: `${component}.${namespace}`, keyEncoding: this.keyEncoding });
    this.namespace = probe.store.slice(component.length + 1);
  }

  #space(tenant: string): KeySpace {
    let space = this.#spaces.get(tenant);
    if (space === undefined) {
      if (typeof tenant !== 'string' || tenant === '') {
        throw new RedfenceError('RF_INVALID_ARGUMENT', 'a kit key needs a tenant (a non-empty string)');
      }
      space = new KeySpace({
        store: `${this.component}.${this.namespace}`,
        tenant,
        keyEncoding: this.keyEncoding,
      });
      if (this.#spaces.size >= MAX_SPACES) this.#spaces.clear();
      this.#spaces.set(tenant, space);
    }
    return space;
  }

  /** Checks the shape of a key (before any Redis call). */
  check(key: KitKey): KitKey {
    if (typeof key !== 'object' || key === null) {
      throw new RedfenceError('RF_INVALID_ARGUMENT', 'a kit key must be an object { tenant, id }');
    }
    this.#space(key.tenant).keyId(key.id);
    return key;
  }

  /** `rf:t=<tenant>:{<component>.<namespace>:<id>}`. */
  base(key: KitKey): string {
    this.check(key);
    return this.#space(key.tenant).state(key.id);
  }

  /** `<base>:<part>` for each part, in order (all in one hash slot). */
  parts(key: KitKey, ...parts: string[]): string[] {
    const base = this.base(key);
    return parts.map((p) => {
      if (!PART.test(p)) throw new RedfenceError('RF_INVALID_ARGUMENT', `bad kit key part ${p}`);
      return `${base}:${p}`;
    });
  }

  /** A log-safe description of a key: the tenant and a short digest of the id, never the id. */
  describe(key: KitKey): string {
    return `${this.component}.${this.namespace} tenant=${key.tenant} ${KeySpace.describeKey(key.id)}`;
  }
}

/** Kit components added after the first four: keys of the same shape, built by {@link KitRecordKeys}. */
export type KitRecordComponent = 'idempotency' | 'dedup';

/**
 * Key names of the idempotency store and the dedup window: `rf:t=<tenant>:{<component>.<namespace>:<id>}`
 * plus `:<part>`, the same rules as {@link KitKeys} (tenant required, one hash slot per entry, ids that
 * are long, odd or personal stored by a SHA-256, every id hashed under `keyEncoding: 'hash'`).
 */
export class KitRecordKeys {
  readonly component: KitRecordComponent;
  readonly namespace: string;
  readonly #space: KeySpace;

  constructor(
    component: KitRecordComponent,
    namespace: string,
    tenant: string,
    options: KitKeysOptions = {},
  ) {
    if (component !== 'idempotency' && component !== 'dedup') {
      throw new RedfenceError('RF_INVALID_ARGUMENT', `unknown kit component ${JSON.stringify(component)}`);
    }
    if (typeof tenant !== 'string' || tenant === '') {
      throw new RedfenceError('RF_INVALID_ARGUMENT', 'a kit key needs a tenant (a non-empty string)');
    }
    this.component = component;
    this.#space = new KeySpace({
      store: `${component}.${namespace}`,
      tenant,
      keyEncoding: options.keyEncoding ?? 'auto',
    });
    this.namespace = this.#space.store.slice(component.length + 1);
  }

  /** `<base>:<part>` of one id (checked before any Redis call). */
  part(id: string | Uint8Array, part: string): string {
    if (!PART.test(part)) throw new RedfenceError('RF_INVALID_ARGUMENT', `bad kit key part ${part}`);
    return `${this.#space.state(id)}:${part}`;
  }
}
