/** A pino-compatible logger (pino itself fits). The library never writes to the console; the default logs nothing. */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

const noop = () => undefined;
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop };
