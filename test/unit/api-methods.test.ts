import { describe, expect, it } from 'vitest';
import { KnownPaths } from '../../src/api/methods.js';

/** The one 405 of /v2 (the router's not-found handler and the unknown-method answer share it). */
describe('a call no /v2 operation takes', () => {
  const known = new KnownPaths();
  known.add('/v2/api-keys', ['GET', 'HEAD']);
  known.add('/v2/api-keys', ['POST']);
  known.add('/v2/api-keys/:key_id', ['GET', 'DELETE']);

  it('is 405 with every method of the path, sorted, in Allow and the message (param method)', () => {
    expect(known.answer('PUT', '/v2/api-keys', 'wk_1')).toEqual({
      status: 405,
      allow: 'GET, HEAD, POST',
      body: {
        error: {
          type: 'invalid_request',
          message: 'PUT is not allowed here; use GET, HEAD, POST',
          param: 'method',
          retry_after: null,
          wake_id: 'wk_1',
        },
      },
    });
    // A path parameter matches one segment, with or without a trailing slash.
    expect(known.answer('QUERY', '/v2/api-keys/key_1/', null).allow).toBe('DELETE, GET');
  });

  it('is 404 naming the method and path when no operation has the path', () => {
    const no = known.answer('GET', '/v2/api-keys/key_1/extra', null);
    expect(no.status).toBe(404);
    expect(no.allow).toBeNull();
    expect(no.body.error).toMatchObject({
      type: 'resource_missing',
      message: 'no such endpoint: GET /v2/api-keys/key_1/extra',
    });
  });
});
