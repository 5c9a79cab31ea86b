/**
 * Redis Cluster hash slot of a key: CRC16 (XMODEM) of the key's hash tag (the bytes between the first
 * `{` and the next `}`, when not empty) or of the whole key, modulo 16384. Used to group keys that one
 * script call may touch together.
 */
const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let j = 0; j < 8; j++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    t[i] = crc;
  }
  return t;
})();

function crc16(bytes: Uint8Array, from: number, to: number): number {
  let crc = 0;
  for (let i = from; i < to; i++)
    crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ (bytes[i] as number)) & 0xff] as number);
  return crc;
}

/** The cluster hash slot (0..16383) of a key. */
export function keySlot(key: string | Uint8Array): number {
  const bytes = typeof key === 'string' ? Buffer.from(key, 'utf8') : key;
  const open = bytes.indexOf(0x7b); // '{'
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // '}'
    if (close > open + 1) return crc16(bytes, open + 1, close) & 16383;
  }
  return crc16(bytes, 0, bytes.length) & 16383;
}
