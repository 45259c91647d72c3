import type { IncomingMessage } from 'node:http';
import type net from 'node:net';
import type { Downloads } from './downloads.js';

/** What bounds one relayed answer. */
export interface RelayBounds {
  /**
   * The answers' budgets and places (server.buffer_response_body_bytes,
   * max_buffered_response_bytes, max_streaming_downloads_per_client, send_timeout_ms).
   */
  answers: Downloads;
  /** The client's address as the places are counted (addressBucket of admission's client address). */
  client: string;
  /** Each chunk of the answer's body, as it is written to the client (the wake's bytes). */
  count: (n: number) => void;
}

/**
 * Writes the body of an origin's ordinary answer to an upgrade request (no switch: a
 * 200, a 404) on the client's socket, once its head is written, under the bounds a
 * proxied answer has (handler.ts's `behind`, with the same Downloads): while the client
 * keeps up, at the origin's pace; a client that falls behind has the answer held for it
 * up to buffer_response_body_bytes (within max_buffered_response_bytes, all answers
 * together), past that paced to its reading, holding one of its address's
 * max_streaming_downloads_per_client places (none left: cut off); and a client that
 * reads nothing for send_timeout_ms while behind, or of the answer's last bytes, is cut
 * off. While it is behind, what it sends is not read, so only its reading counts as
 * progress (the socket's timeout is refreshed by reads and writes alike).
 *
 * The socket is ended after the answer (destroyed if the origin broke off); cut off, it
 * is destroyed: the caller's 'close' listener lets go of the origin and records the end.
 * `socket` is the one Node's 'upgrade' event hands over for a request without a body.
 */
export function relayAnswer(res: IncomingMessage, socket: net.Socket, b: RelayBounds): void {
  const answers = b.answers;
  /** Bytes this answer holds of the gateway-wide budget. */
  let held = 0;
  /** It holds one of the client's streaming places. */
  let streaming = false;
  /** The send timeout is armed (the client is behind, or the answer is all written). */
  let timed = false;
  let ended = false;
  const arm = () => {
    if (timed) return;
    timed = true;
    socket.pause();
    socket.setTimeout(answers.limits.sendTimeoutMs);
  };
  const cut = () => socket.destroy();
  // A timer Node's server left on the socket is no longer its to act on; this one is the send timeout.
  socket.setTimeout(0);
  socket.on('timeout', cut);
  /** The client is not keeping up: go on reading the origin (true) or not (false), as handler.ts decides. */
  const behind = (n: number): boolean => {
    arm();
    if (streaming) return false;
    const queued = socket.writableLength;
    if (answers.mayHold(held, queued, n)) {
      held = queued;
      return true;
    }
    if (!answers.take(b.client)) {
      cut();
      return false;
    }
    streaming = true;
    return false;
  };
  res.on('data', (c: Buffer) => {
    b.count(c.length);
    if (!socket.write(c) && !behind(c.length)) res.pause();
  });
  socket.on('drain', () => {
    if (held !== 0) {
      answers.release(held);
      held = 0;
    }
    if (ended) return;
    // Caught up: not timed until it falls behind again, and what it sends is read (dropped) again.
    timed = false;
    socket.setTimeout(0);
    socket.resume();
    res.resume();
  });
  res.on('end', () => {
    ended = true;
    // Its last bytes wait send_timeout_ms at most for the client.
    arm();
    socket.end(() => socket.destroy());
  });
  // The origin broke off: the client is not left to take what it has for the whole answer.
  res.on('error', cut);
  socket.once('close', () => {
    socket.setTimeout(0);
    if (held !== 0) answers.release(held);
    held = 0;
    if (streaming) answers.give(b.client);
    streaming = false;
  });
}
