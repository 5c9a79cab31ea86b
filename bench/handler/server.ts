/**
 * The far side of the handler benchmark, in its own process (its CPU is not the handler's): answers
 * every POST after BENCH_LATENCY_MS (20). Prints its port on the first stdout line.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const latency = Number(process.env.BENCH_LATENCY_MS ?? 20);
let calls = 0;
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    calls++;
    setTimeout(() => res.writeHead(204).end(), latency);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
});
process.on('message', () => process.send?.({ calls }));
process.on('disconnect', () => process.exit(0));
