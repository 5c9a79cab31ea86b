/** The redfence CLI run in this process (src/cli/main.ts), for tests of its verbs. */
import { main } from '../../src/cli/main.js';

export interface CliResult {
  code: number;
  out: string;
  err: string;
}

/** Runs `redfence <args>` and returns its exit code and what it printed to stdout and stderr. */
export async function runCli(args: readonly string[]): Promise<CliResult> {
  let out = '';
  let err = '';
  const code = await main(
    [...args],
    (s) => {
      out += s;
    },
    (s) => {
      err += s;
    },
  );
  return { code, out, err };
}
