/**
 * Serdes: how a topology turns record bytes into values and back. Null bytes are always the null value
 * and the null value always null bytes (a tombstone): a serde never sees null. A serde must be
 * deterministic: the same value gives the same bytes (state and replays depend on it).
 */

/** Turns values of type T into bytes and back. `topic` is the topic the bytes are read from or written to. */
export interface Serde<T> {
  serialize(value: T, topic: string): Buffer;
  deserialize(bytes: Buffer, topic: string): T;
}

/** The serdes a topology offers: `serdes.json()` (the default of every key, value and store), `serdes.string()` (UTF-8), `serdes.bytes()` (the bytes themselves). */
export const serdes = {
  json: <T = unknown>(): Serde<T> => ({
    serialize: (value) => Buffer.from(JSON.stringify(value), 'utf8'),
    deserialize: (bytes) => JSON.parse(bytes.toString('utf8')) as T,
  }),
  string: (): Serde<string> => ({
    serialize: (value) => Buffer.from(value, 'utf8'),
    deserialize: (bytes) => bytes.toString('utf8'),
  }),
  bytes: (): Serde<Buffer> => ({
    serialize: (value) => Buffer.from(value),
    deserialize: (b) => Buffer.from(b),
  }),
} as const;

/** Serializes a value that may be null (null: no bytes). */
export function toBytes<T>(serde: Serde<T>, value: T | null, topic: string): Buffer | null {
  return value === null || value === undefined ? null : serde.serialize(value, topic);
}

/** Deserializes bytes that may be null (null: the null value). */
export function fromBytes<T>(serde: Serde<T>, bytes: Buffer | null, topic: string): T | null {
  return bytes === null ? null : serde.deserialize(bytes, topic);
}

/** True when `s` has the shape of a serde. */
export function isSerde(s: unknown): s is Serde<unknown> {
  return (
    typeof s === 'object' &&
    s !== null &&
    typeof (s as Serde<unknown>).serialize === 'function' &&
    typeof (s as Serde<unknown>).deserialize === 'function'
  );
}
