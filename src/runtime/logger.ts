/** A pino-compatible logger (pino itself fits). The library never writes to the console; the default logs nothing. */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

const noop = () => undefined;
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop };

/** The error's class and code, for logs (its message may quote a record's value, so it is left out). */
export function errorShape(err: unknown): { error: string; code?: string } {
  const name = err instanceof Error ? err.name : typeof err;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' || typeof code === 'number'
    ? { error: name, code: String(code) }
    : { error: name };
}
