/**
 * Counters and histograms for the proxy's hot path. prom-client resolves a child's
 * label values (validation, a sorted hash of the label object) on every inc() and
 * observe(), which cost about 8 us per proxied request across the three instruments
 * it touches (bench/RESULTS.md). Here a child is a plain object whose inc() adds to a
 * number and whose observe() finds a bucket; the label values are resolved once, when
 * the child is made. The classes register in a prom-client Registry like its own
 * metrics (name, help, type, get, reset), so /metrics prints them the same way.
 */

interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

interface MetricObject {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  values: MetricValue[];
  aggregator: 'sum';
}

interface HotOptions<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
}

abstract class Labelled<L extends string, C> {
  readonly name: string;
  readonly help: string;
  protected readonly labelNames: readonly L[];
  protected readonly children = new Map<string, { labels: Record<string, string>; child: C }>();

  constructor(o: HotOptions<L>) {
    this.name = o.name;
    this.help = o.help;
    this.labelNames = o.labelNames;
  }

  /** The child for these label values, in labelNames order (made once, then reused). */
  labels(...values: string[]): C {
    if (values.length !== this.labelNames.length)
      throw new Error(`${this.name} takes ${this.labelNames.length} label values, not ${values.length}`);
    const k = values.join('\u0000');
    let e = this.children.get(k);
    if (e === undefined) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((n, i) => {
        labels[n] = values[i] as string;
      });
      e = { labels, child: this.make() };
      this.children.set(k, e);
    }
    return e.child;
  }

  protected abstract make(): C;

  /** Zeroes every child in place: callers keep the children they hold, and those keep counting. */
  abstract reset(): void;
}

export interface HotCounterChild {
  value: number;
  inc(n?: number): void;
}

class CounterChild implements HotCounterChild {
  value = 0;
  inc(n = 1): void {
    this.value += n;
  }
}

/** A labelled counter whose children count with one addition. */
export class HotCounter<L extends string> extends Labelled<L, HotCounterChild> {
  readonly type = 'counter';

  protected make(): HotCounterChild {
    return new CounterChild();
  }

  reset(): void {
    for (const { child } of this.children.values()) child.value = 0;
  }

  get(): MetricObject {
    const values: MetricValue[] = [];
    for (const { labels, child } of this.children.values()) values.push({ labels, value: child.value });
    return { name: this.name, help: this.help, type: 'counter', values, aggregator: 'sum' };
  }
}

export interface HotHistogramChild {
  observe(v: number): void;
}

class HistogramChild implements HotHistogramChild {
  /** counts[i]: observations in (upper[i-1], upper[i]]; the last slot is above every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly upper: Float64Array) {
    this.counts = new Float64Array(upper.length + 1);
  }

  observe(v: number): void {
    const u = this.upper;
    let i = 0;
    while (i < u.length && v > (u[i] as number)) i++;
    this.counts[i] = (this.counts[i] as number) + 1;
    this.sum += v;
    this.count++;
  }
}

/** A labelled histogram (cumulative buckets, sum and count, as Prometheus reads them). */
export class HotHistogram<L extends string> extends Labelled<L, HotHistogramChild> {
  readonly type = 'histogram';
  private readonly upper: Float64Array;

  constructor(o: HotOptions<L> & { buckets: readonly number[] }) {
    super(o);
    this.upper = Float64Array.from([...o.buckets].sort((a, b) => a - b));
  }

  protected make(): HotHistogramChild {
    return new HistogramChild(this.upper);
  }

  reset(): void {
    for (const { child } of this.children.values()) {
      const h = child as HistogramChild;
      h.counts.fill(0);
      h.sum = 0;
      h.count = 0;
    }
  }

  get(): MetricObject {
    const values: MetricValue[] = [];
    for (const { labels, child } of this.children.values()) {
      const h = child as HistogramChild;
      let acc = 0;
      for (let i = 0; i <= this.upper.length; i++) {
        acc += h.counts[i] as number;
        const le = i < this.upper.length ? (this.upper[i] as number) : '+Inf';
        values.push({ labels: { le, ...labels }, value: acc, metricName: `${this.name}_bucket` });
      }
      values.push({ labels, value: h.sum, metricName: `${this.name}_sum` });
      values.push({ labels, value: h.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' };
  }
}
