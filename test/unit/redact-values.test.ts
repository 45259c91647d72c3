import { describe, expect, it } from 'vitest';
import { budgetFor } from '../../src/capture/budget.js';
import type { WakeDetail } from '../../src/capture/detail-types.js';
import { Redactor } from '../../src/capture/redact.js';
import { fillRedacted } from '../../src/replay/fill.js';

/** Named fields whatever their value, escaped JSON wherever it stands, and every other byte kept as sent (DESIGN "Wake detail"). */
const FIELDS = ['password', 'secret', 'token', 'access_token', 'refresh_token', 'api_key', 'card_number', 'cvc'];
const r = new Redactor(Buffer.alloc(32, 1), ['authorization', 'cookie'], FIELDS);
const KEEP = { budget: budgetFor(32_768), keepOpaque: true };
const DEFAULT = { budget: budgetFor(32_768), keepOpaque: false };
const stored = (b: { data: Buffer; encoding: string }) =>
  b.encoding === 'base64' ? Buffer.from(b.data.toString(), 'base64').toString('latin1') : b.data.toString();
/** A body redacted whole (total = its length) or cut (`cut` more bytes were sent). */
const redact = (body: string, ct = 'application/json', cut = 0, o = DEFAULT) =>
  stored(r.forWake('wk_values').body(Buffer.from(body), Buffer.byteLength(body) + cut, ct, undefined, o));
const M = '"\\[redacted:[0-9a-f]{12}\\]"';
const mark = (v: string) => r.forWake('wk_values').marker(v);

describe('redaction: a named field is replaced whatever its value', () => {
  it('an array or object value is one marker (a whole body)', () => {
    expect(redact('{"user":"a","password":["hunter2"]}')).toMatch(new RegExp(`^\\{"user":"a","password":${M}\\}$`));
    expect(redact('{"user":"a","secret":{"value":"hunter2","n":[1,{"x":"y"}]}}')).toMatch(
      new RegExp(`^\\{"user":"a","secret":${M}\\}$`),
    );
    // At any depth, and in an array of documents.
    expect(redact('[{"a":{"token":{"id":"hunter2"}}}]')).toMatch(new RegExp(`^\\[\\{"a":\\{"token":${M}\\}\\}\\]$`));
    // Marked as the value was sent; equal values equal.
    expect(redact('{"password":["hunter2"],"b":{"password":["hunter2"]}}')).toBe(
      `{"password":"${mark('["hunter2"]')}","b":{"password":"${mark('["hunter2"]')}"}}`,
    );
    // Literals too.
    expect(redact('{"token":true,"cvc":null}')).toMatch(new RegExp(`^\\{"token":${M},"cvc":${M}\\}$`));
  });

  it('every duplicate of a named key is replaced, whichever comes last', () => {
    for (const body of [
      '{"token":"hunter2","token":{}}',
      '{"token":{"v":"hunter2"},"token":"x"}',
      '{"token":"hunter2","token":[]}',
    ]) {
      const out = redact(body);
      expect(out, body).not.toContain('hunter2');
      expect(out, body).toMatch(new RegExp(`^\\{"token":${M},"token":${M}\\}$`));
    }
  });

  it('in a body cut at max_body_bytes: through the matching bracket, or to the cut', () => {
    const closed = redact('{"secret":{"v":"hunter2","w":["}"]},"note":"kept","pad":"xx', 'application/json', 500);
    expect(closed).toMatch(new RegExp(`^\\{"secret":${M},"note":"kept","pad":"xx$`));
    const open = redact('{"a":1,"password":["hunter2","hunt', 'application/json', 500);
    expect(open).not.toContain('hunt');
    expect(open).toMatch(new RegExp(`^\\{"a":1,"password":${M}$`));
    // Pretty-printed, cut after the object: nothing of it kept.
    const pretty = redact('{\n  "secret": {\n    "v": "hunter2"\n  },\n  "pad": "xx', 'application/json', 500);
    expect(pretty).toMatch(new RegExp(`^\\{\\n  "secret": ${M},\\n  "pad": "xx$`));
    // A string cut after an escape's backslash.
    expect(redact('{"a":"x","token":"hun\\"ter2\\', 'application/json', 500)).toMatch(
      new RegExp(`^\\{"a":"x","token":${M}$`),
    );
    // Not named: its named fields inside are still found.
    const inner = redact('{"user":{"password":"hunter2","deep":{"token":["hunter3"]}},"pad":"x', 'text/plain', 500);
    expect(inner).not.toMatch(/hunter/);
    expect(inner).toContain('"pad":"x');
  });

  it('in an escaped document inside a string', () => {
    const out = JSON.parse(redact(JSON.stringify({ data: JSON.stringify({ password: ['hunter2'], n: 1 }) })));
    expect(out.data).toMatch(new RegExp(`^\\{"password":${M},"n":1\\}$`));
  });
});

describe('redaction: escaped JSON in a string, in a body that is not one document', () => {
  it('a body cut at max_body_bytes', () => {
    const cut = '{"data":"{\\"password\\":\\"hunter2\\"}","pad":"xxxx';
    const out = redact(cut, 'application/json', 100_000);
    expect(out).not.toContain('hunter2');
    expect(out).toContain('"pad":"xxxx');
    // Escaped twice, cut inside the nested document.
    const twice = JSON.stringify({
      a: JSON.stringify({ b: JSON.stringify({ token: 'hunter2', more: 'x'.repeat(20) }) }),
    });
    expect(redact(twice.slice(0, -30), 'application/json', 1000)).not.toContain('hunter2');
  });

  it('NDJSON: each line a document', () => {
    const nd =
      '{"a":1}\n{"data":"{\\"password\\":\\"hunter2\\"}"}\n{"secret":{"x":"hunter3"},"big":12345678901234567890}\n';
    const out = redact(nd, 'application/x-ndjson');
    expect(out).not.toMatch(/hunter/);
    expect(out.split('\n')).toHaveLength(4);
    expect(out.startsWith('{"a":1}\n')).toBe(true);
    expect(out).toContain('"big":12345678901234567890}\n');
    // A line naming a field with escapes.
    expect(redact('{"a":1}\n{"pass\\u0077ord":"hunter2"}\n', 'application/x-ndjson')).not.toContain('hunter2');
    // Cut in its last line.
    const cut = redact(nd.slice(0, -40), 'application/x-ndjson', 40);
    expect(cut).not.toMatch(/hunter/);
  });

  it('JSON among other text', () => {
    const out = redact('event: {"data":"{\\"token\\":\\"hunter2\\"}"} end', 'text/plain');
    expect(out).not.toContain('hunter2');
    expect(out.startsWith('event: {"data":')).toBe(true);
  });
});

describe('redaction: a gateway key at the cut of a binary body', () => {
  it('opaque_bodies: keep keeps no start of a key at its end', () => {
    const key = `svc_live_${'A'.repeat(40)}`;
    const bin = Buffer.concat([Buffer.from([0xff, 0xfe, 0x80, 0x81]), Buffer.from(key.slice(0, 9 + 31))]);
    const b = stored(r.body(bin, bin.length + 100, 'application/octet-stream', undefined, KEEP));
    expect(b).not.toContain('svc_live_AAAAAAAAAA');
    expect(b.startsWith('\xff\xfe\x80\x81')).toBe(true);
    // Whole, a binary body is kept byte for byte.
    const whole = Buffer.from([0xff, 0xfe, 0x80, 0x81, 0x41]);
    expect(stored(r.body(whole, whole.length, 'application/octet-stream', undefined, KEEP))).toBe(
      whole.toString('latin1'),
    );
  });
});

describe('redaction keeps every other byte as sent', () => {
  it('numbers, spacing, key order, escapes and duplicates of a JSON body', () => {
    const body =
      '{ "order_id" : 12345678901234567890,\n  "amount": 1.50, "note":"caf\\u00e9 \\/x",\n  "password" :  "hunter2", "n":1, "n":2 }';
    const out = redact(body);
    expect(out).toBe(body.replace('"hunter2"', `"${mark('hunter2')}"`));
    // A number or escaped string is marked as its value reads.
    expect(redact('{"cvc":123,"token":"a\\u0062c"}')).toBe(`{"cvc":"${mark('123')}","token":"${mark('abc')}"}`);
  });

  it('a body with nothing to redact is kept as written', () => {
    for (const body of ['{"a" : 1e3, "b":[ ]}', '{"note":"the password is in the vault"}'])
      expect(redact(body)).toBe(body);
  });
});

describe('redaction: a form typed as something else', () => {
  it('a single-line form mentioning a named field is read as a form whatever its type', () => {
    for (const ct of ['application/json', 'application/octet-stream', 'application/x-custom', 'text/html']) {
      const out = redact('user=a&password=hunter2&n=1', ct);
      expect(out, ct).toMatch(/^user=a&password=%5Bredacted%3A[0-9a-f]{12}%5D&n=1$/);
    }
    // Not a form: prose, several lines, JSON.
    expect(redact('a note: the password=field is documented', 'text/markdown')).not.toContain('%5B');
  });
});

describe('replay fills markers where they stand (the rest re-sent as captured)', () => {
  const detail = (body: string, ct = 'application/json'): WakeDetail => ({
    query: '',
    request_headers: [['content-type', ct]],
    response_headers: null,
    request_body: { body, bytes: Buffer.byteLength(body), truncated: false, encoding: 'utf8' },
    response_body: null,
    diff: null,
  });

  it('big integers, spacing and duplicates are sent as captured', () => {
    const sent = '{ "order_id" : 12345678901234567890,\n "password" : "hunter2", "n":1, "n":2, "card":{"cvc":123} }';
    const captured = redact(sent);
    const res = fillRedacted(detail(captured), { '$.password': 'p"w', '$.card.cvc': 123 }, () => false);
    expect(res.ok).toBe(true);
    if (!res.ok) return;
    expect(res.filled.body?.toString()).toBe(sent.replace('"hunter2"', '"p\\"w"'));
    // A value of another type than the marker's (a scalar for what was an array): as JSON.
    const arr = fillRedacted(detail(redact('{"password":["a"], "x":1.0}')), { '$.password': null }, () => false);
    expect(arr.ok && arr.filled.body?.toString()).toBe('{"password":null, "x":1.0}');
  });

  it('a marker inside a string or a key is still refused, and a missing one named once', () => {
    const m = mark('x');
    const res = fillRedacted(detail(`{"a":"pre ${m}","${m}":1}`), {}, () => false);
    expect(res).toMatchObject({ ok: false, refusal: { kind: 'unreachable' } });
    const dup = fillRedacted(detail(`{"token":"${m}","token":"${m}"}`), {}, () => false);
    expect(dup).toEqual({ ok: false, refusal: { kind: 'missing', names: ['$.token'] } });
  });

  it('a form typed as JSON is filled as the redactor read it: a form', () => {
    const captured = redact('user=a&password=hunter2', 'application/json');
    const res = fillRedacted(detail(captured, 'application/json'), { password: 'p w' }, () => false);
    expect(res.ok && res.filled.body?.toString()).toBe('user=a&password=p%20w');
  });
});

describe('redaction: multipart parts as servers split them', () => {
  const CT = 'multipart/form-data; boundary=B0und';
  it('a delimiter not at a line start is part of the value, not a new part', () => {
    // Every RFC 2046 parser (busboy, multer, Go, Werkzeug) reads the password as all of this.
    const value = 'hunter2 --B0und\r\ncontent-disposition: form-data; name="note"\r\n\r\nstill-the-password';
    const body = `--B0und\r\ncontent-disposition: form-data; name="password"\r\n\r\n${value}\r\n--B0und--\r\n`;
    const out = redact(body, CT);
    expect(out).not.toContain('hunter2');
    expect(out).not.toContain('still-the-password');
  });
  it('a delimiter at a line start (CRLF or bare LF) still starts a part', () => {
    const crlf =
      '--B0und\r\ncontent-disposition: form-data; name="note"\r\n\r\nkept\r\n--B0und\r\ncontent-disposition: form-data; name="password"\r\n\r\nhunter2\r\n--B0und--\r\n';
    const out = redact(crlf, CT);
    expect(out).toContain('kept');
    expect(out).not.toContain('hunter2');
    const lf = crlf.replaceAll('\r\n', '\n');
    expect(redact(lf, CT)).not.toContain('hunter2');
  });
});

describe('redaction: .properties as java.util.Properties reads it', () => {
  const P = 'text/x-java-properties';
  it('a name ending at whitespace, alone or before = or :', () => {
    for (const line of [
      'password hunter2-a',
      'password\thunter2-a',
      '  password  :  hunter2-a',
      'password =hunter2-a',
    ]) {
      const out = redact(`user=ann\n${line}\nhost=db\n`, P);
      expect(out, line).not.toContain('hunter2');
      expect(out).toContain('user=ann\n');
      expect(out).toContain('\nhost=db\n');
      expect(out).toMatch(/\[redacted:[0-9a-f]{12}\]/);
    }
  });
  it('a name spelled with escapes (p\\u0061ssword, pass\\word) is read as its parser reads it', () => {
    for (const line of ['p\\u0061ssword=hunter2-b', 'pass\\word hunter2-b', 'p\\u0061ssword : hunter2-b']) {
      expect(redact(`${line}\n`, P), line).not.toContain('hunter2');
    }
  });
  it('comments and names not named are kept as sent', () => {
    const body = '# password hunter2-c\n! password hunter2-c\nuser ann\n';
    expect(redact(body, P)).toBe(body);
    // Plain text is not read with whitespace separators: prose keeps its words.
    expect(redact('reset your password now\n', 'text/plain')).toBe('reset your password now\n');
  });
});

describe('redaction: multipart nested in a part (RFC 2388 multipart/mixed in form-data)', () => {
  const nest = (depth: number): { body: string; type: string } => {
    let body = '--b0\r\nContent-Disposition: form-data; name="password"\r\n\r\nhunter2-deep\r\n--b0--\r\n';
    for (let d = 1; d <= depth; d++) {
      body = `--b${d}\r\nContent-Disposition: form-data; name="files"\r\nContent-Type: multipart/mixed;\r\n boundary=b${d - 1}\r\n\r\n${body}\r\n--b${d}--\r\n`;
    }
    return { body, type: `multipart/form-data; boundary=b${depth}` };
  };
  it('a named field at any depth is not kept, the parts around it are', () => {
    for (const depth of [0, 1, 2, 4, 5, 8]) {
      const { body, type } = nest(depth);
      const out = redact(body, type);
      expect(out, `depth ${depth}`).not.toContain('hunter2-deep');
      expect(out).toContain(`--b${depth}--`);
    }
    // Within the depth read, only the value goes.
    expect(redact(nest(2).body, nest(2).type)).toContain('name="password"');
  });
});
