/**
 * OTLP's partial success, read from an ExportTraceServiceResponse (protobuf): field 1
 * `partial_success` { 1: `rejected_spans` (int64), 2: `error_message` (string) }. A
 * collector that took an export and still refused some of its spans says so here,
 * with a 2xx. Anything it cannot read is taken as nothing rejected.
 */
export function partialSuccess(b: Uint8Array): { rejected: number; message: string } {
  const none = { rejected: 0, message: '' };
  try {
    const outer = fields(b, 0, b.length);
    const ps = outer.get(1);
    if (ps === undefined || typeof ps === 'number') return none;
    const inner = fields(b, ps[0], ps[1]);
    const n = inner.get(1);
    const m = inner.get(2);
    return {
      rejected: typeof n === 'number' ? n : 0,
      message: m !== undefined && typeof m !== 'number' ? Buffer.from(b.subarray(m[0], m[1])).toString('utf8') : '',
    };
  } catch {
    return none;
  }
}

/** A message's fields from `start` to `end`: a varint's value, or a length-delimited field's [start, end). */
function fields(b: Uint8Array, start: number, end: number): Map<number, number | [number, number]> {
  const out = new Map<number, number | [number, number]>();
  let i = start;
  const varint = (): number => {
    let v = 0;
    let mul = 1;
    for (let k = 0; k < 10; k++) {
      if (i >= end) throw new Error('truncated');
      const c = b[i++] as number;
      v += (c & 0x7f) * mul;
      if ((c & 0x80) === 0) return v;
      mul *= 128;
    }
    throw new Error('varint too long');
  };
  while (i < end) {
    const key = varint();
    const field = Math.floor(key / 8);
    switch (key & 7) {
      case 0:
        out.set(field, varint());
        break;
      case 1:
        i += 8;
        break;
      case 2: {
        const len = varint();
        if (i + len > end) throw new Error('truncated');
        out.set(field, [i, i + len]);
        i += len;
        break;
      }
      case 5:
        i += 4;
        break;
      default:
        throw new Error('unknown wire type');
    }
  }
  return out;
}
