/** Waiting on a condition without a fixed sleep: poll it, with a bound. */

/**
 * Calls `check` every `everyMs` until it returns true; rejects naming `label` once `timeoutMs` have
 * passed. A `check` that throws ends the wait with its error.
 */
export async function pollUntil(
  label: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 60_000,
  everyMs = 100,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${label}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
