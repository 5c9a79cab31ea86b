// Copies the fence's and the handler's Lua files next to the compiled modules (tsc copies only .ts output).
import { chmodSync, cpSync } from 'node:fs';

cpSync('src/fence/lua', 'dist/fence/lua', { recursive: true });
cpSync('src/handler/lua', 'dist/handler/lua', { recursive: true });
chmodSync('dist/cli/bin.js', 0o755);
