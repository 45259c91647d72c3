/**
 * A small JSON-lines logger. Anything that looks like a key or signing secret is
 * masked before it is written, whatever field it hides in.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };
const SECRET = /\b(svc_(?:live|test)_|whsec_)[A-Za-z0-9+/=]+/g;

export const redact = (s: string): string => s.replace(SECRET, '$1[redacted]');

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export function createLogger(level: LogLevel, write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  const min = ORDER[level];
  const emit = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[lvl] < min) return;
    let line: string;
    try {
      line = JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...fields }, (_k, v) =>
        v instanceof Error ? { name: v.name, message: v.message } : v,
      );
    } catch {
      line = JSON.stringify({ time: new Date().toISOString(), level: lvl, msg });
    }
    write(`${redact(line)}\n`);
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
  };
}

export const silentLogger: Logger = createLogger('silent');
