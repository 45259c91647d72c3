/**
 * Runs async steps one at a time, each starting once the one before it has settled
 * (whether it succeeded or failed): a read-check-write of a record then sees what the
 * step before it wrote.
 */
export class InTurn {
  private last: Promise<unknown> = Promise.resolve();

  run<T>(step: () => Promise<T>): Promise<T> {
    const run = this.last.then(step, step);
    this.last = run.catch(() => {});
    return run;
  }
}
