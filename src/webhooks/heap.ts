/** A binary min-heap ordered by a numeric key. */
export class MinHeap<T> {
  private readonly items: T[] = [];
  constructor(private readonly key: (t: T) => number) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(t: T): void {
    const a = this.items;
    a.push(t);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.key(a[p] as T) <= this.key(a[i] as T)) break;
      [a[p], a[i]] = [a[i] as T, a[p] as T];
      i = p;
    }
  }

  pop(): T | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last !== undefined) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && this.key(a[l] as T) < this.key(a[m] as T)) m = l;
        if (r < a.length && this.key(a[r] as T) < this.key(a[m] as T)) m = r;
        if (m === i) break;
        [a[m], a[i]] = [a[i] as T, a[m] as T];
        i = m;
      }
    }
    return top;
  }
}
