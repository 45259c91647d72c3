import http2, { type ServerHttp2Stream } from 'node:http2';

const { NGHTTP2_NO_ERROR } = http2.constants;

/**
 * Closes a stream whose answer has been sent while its request's body is still coming, with
 * RST_STREAM NO_ERROR, which asks the client to stop sending without error (RFC 9113 §8.1):
 * otherwise the body is read (or left unread) for as long as the client drips it.
 */
export function stopUpload(s: ServerHttp2Stream): void {
  if (s.destroyed || s.closed || s.readableEnded) return;
  s.close(NGHTTP2_NO_ERROR);
  // The body's unread chunks would hold the stream open (its readable side never ends
  // on Node 20): it is done with now.
  if (!s.destroyed) s.destroy();
}
