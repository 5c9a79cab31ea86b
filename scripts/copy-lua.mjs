// Copies the Lua files (the fence's, the handler's, the ops tools' and each kit component's) and the
// outbox's SQL migrations next to the compiled modules (tsc copies only .ts output).
import { chmodSync, cpSync, existsSync, readdirSync } from 'node:fs';

cpSync('src/fence/lua', 'dist/fence/lua', { recursive: true });
cpSync('src/handler/lua', 'dist/handler/lua', { recursive: true });
cpSync('src/ops/lua', 'dist/ops/lua', { recursive: true });
cpSync('src/store/lua', 'dist/store/lua', { recursive: true });
cpSync('src/outbox/sql', 'dist/outbox/sql', { recursive: true });
for (const component of readdirSync('src/kit')) {
  const lua = `src/kit/${component}/lua`;
  if (existsSync(lua)) cpSync(lua, `dist/kit/${component}/lua`, { recursive: true });
}
chmodSync('dist/cli/bin.js', 0o755);
