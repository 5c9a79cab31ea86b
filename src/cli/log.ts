/**
 * The JSON lines logger of `redfence run`: one object per line on stderr, at or above a level; `fields`
 * go into every line (a worker's `worker` index).
 */
import type { Logger } from '../index.js';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function jsonLogger(level: LogLevel, instance: string, fields: object = {}): Logger {
  const min = LOG_LEVELS.indexOf(level);
  const at = (i: number) => (obj: object, msg?: string) => {
    if (i >= min)
      process.stderr.write(
        `${JSON.stringify({ time: new Date().toISOString(), level: LOG_LEVELS[i], instance, ...fields, msg, ...obj })}\n`,
      );
  };
  return { debug: at(0), info: at(1), warn: at(2), error: at(3) };
}
