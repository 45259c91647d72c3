import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';

const TWO =
  "carries credentials (user:password@) and tracing.headers sets authorization too: keep one of them (the URL's are sent as Basic authentication)";

const problems = (values: Record<string, unknown>): string[] => {
  try {
    loadConfig({ values, env: {} });
    return [];
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message.split('\n');
  }
};

/** docs/configuration.md: a bad config names every problem at once. */
describe('the credentials checks of tracing.otlp_url report with every other problem', () => {
  it('two credentials beside other tracing faults: all in one error', () => {
    const got = problems({
      tracing: {
        otlp_url: 'http://u:s3cret@otel:4318/v1/traces',
        headers: { authorization: 'Bearer t0ken', host: 'x' },
        sample_ratio: 5,
        queue_size: 0,
      },
    });
    expect(got).toContain(`config: tracing.otlp_url: ${TWO}`);
    expect(got.some((l) => l.startsWith('config: tracing.sample_ratio:'))).toBe(true);
    expect(got.some((l) => l.startsWith('config: tracing.queue_size:'))).toBe(true);
    expect(got.some((l) => l.startsWith('config: tracing.headers.host:'))).toBe(true);
    expect(got.join('\n')).not.toContain('s3cret');
    expect(got.join('\n')).not.toContain('t0ken');
  });

  it('two credentials beside a fault elsewhere in the config: both named', () => {
    const got = problems({
      server: { port: 'eighty' },
      tracing: { otlp_url: 'http://u:p@otel/v1/traces', headers: { Authorization: 'Bearer t' } },
    });
    expect(got).toContain(`config: tracing.otlp_url: ${TWO}`);
    expect(got.some((l) => l.startsWith('config: server.port:'))).toBe(true);
  });

  it("the URL's other credential faults are named with the rest too, each once", () => {
    const bad = problems({ tracing: { otlp_url: 'http://u%zz:p@otel/v1/traces', sample_ratio: 5 } });
    expect(bad).toContain(
      'config: tracing.otlp_url: its credentials (user:password@) are not valid percent-encoding (write a % as %25)',
    );
    expect(bad.some((l) => l.startsWith('config: tracing.sample_ratio:'))).toBe(true);
    expect(bad.filter((l) => l.startsWith('config: tracing.otlp_url:'))).toHaveLength(1);
    const colon = problems({ tracing: { otlp_url: 'http://a%3Ab:p@otel/v1/traces', max_retries: 99 } });
    expect(colon.some((l) => l.startsWith('config: tracing.otlp_url: the user name'))).toBe(true);
    expect(colon.some((l) => l.startsWith('config: tracing.max_retries:'))).toBe(true);
  });

  it('alone, the check says it once, as before', () => {
    expect(
      problems({ tracing: { otlp_url: 'http://u:p@otel/v1/traces', headers: { authorization: 'Bearer t' } } }),
    ).toEqual([`config: tracing.otlp_url: ${TWO}`]);
  });
});
