#!/usr/bin/env node
import { main } from './main.js';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // The verb is done: a leftover timer or socket of a client (ioredis waits 2 s before destroying a
    // socket it gave up on) must not keep the process alive.
    setTimeout(() => process.exit(code), code === 0 ? 2000 : 100).unref();
  },
  (err: unknown) => {
    process.stderr.write(`redfence: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
