import { X509Certificate } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { ConfigError } from '../config/index.js';

/** A PEM file of a certificate chain, a key or client CAs is kilobytes (all of Mozilla's CAs: ~220 kB). */
export const MAX_PEM_BYTES = 1024 * 1024;

/**
 * A file read whole, if it is a regular file (a symlink to one is) of at most `max`
 * bytes: a path swapped for a FIFO, a device (/dev/zero) or a huge file is refused
 * at once instead of blocking or filling the control thread's memory (at start, or
 * on a reload, where the old certificates then keep serving).
 */
export function readBounded(file: string, path: string, max: number): Buffer {
  const shown = shownPath(file);
  let fd: number;
  try {
    // Non-blocking: opening a FIFO no one writes would otherwise wait for good.
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    throw new ConfigError(path, `cannot read ${shown}: ${(e as NodeJS.ErrnoException).code ?? firstLine(e)}`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new ConfigError(path, `${shown} is not a regular file`);
    if (st.size > max)
      throw new ConfigError(path, `${shown} is ${st.size} bytes, larger than the ${max} such a file may be`);
    return readFileSync(fd);
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError(path, `cannot read ${shown}: ${(e as NodeJS.ErrnoException).code ?? firstLine(e)}`);
  } finally {
    closeSync(fd);
  }
}

/**
 * A file's path as an error may print it: a value that is no path (the PEM text itself
 * given in its place, `key: ${TLS_KEY}`) is never repeated, since it may be a private key.
 */
export function shownPath(file: string): string {
  return /[\r\n]|-----BEGIN/.test(file) || file.length > 1024
    ? 'the value given (PEM text or a long value, not repeated here: a path to a file is expected)'
    : file;
}

/**
 * A file of CA certificates (a listener's `client_ca`, a route's `ca`), read within its
 * bound; one that holds no PEM certificate (empty, say) is a config error, never taken
 * as no `ca` at all (Node would then trust the system's CAs).
 */
export function readCaFile(file: string, path: string): string {
  const ca = readBounded(file, path, MAX_PEM_BYTES).toString('utf8');
  try {
    createSecureContext({ ca });
    new X509Certificate(ca);
  } catch (e) {
    throw new ConfigError(path, `${shownPath(file)} holds no PEM certificate: ${firstLine(e)}`);
  }
  return ca;
}

/** An error's message, its first line only (OpenSSL's run on). */
export const firstLine = (e: unknown) => String((e as Error)?.message ?? e).split('\n')[0];
