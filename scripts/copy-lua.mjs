// Copies the fence's Lua files and the outbox's SQL migrations next to the compiled modules (tsc copies only .ts output).
import { chmodSync, cpSync } from 'node:fs';

cpSync('src/fence/lua', 'dist/fence/lua', { recursive: true });
cpSync('src/outbox/sql', 'dist/outbox/sql', { recursive: true });
chmodSync('dist/cli/bin.js', 0o755);
