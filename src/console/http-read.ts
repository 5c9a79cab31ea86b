/** An HTTP answer's body read as it comes and refused past a size (never buffered whole first). */

/** The body as text; throws `<what> over <n> MB` past `max` bytes. */
export async function boundedText(res: Response, max: number, what: string): Promise<string> {
  const reader = res.body?.getReader();
  if (reader === undefined) return '';
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      throw new Error(`${what} over ${Math.round(max / (1024 * 1024))} MB`);
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString('utf8');
}
