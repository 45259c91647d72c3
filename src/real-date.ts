/**
 * Whether an ISO 8601 text (`YYYY-MM-DDTHH:MM[:SS]…`) names a real calendar date and
 * time: JavaScript's parser shifts 2027-02-30 to March 2 and 24:00 to the next day,
 * which a user never meant. Years 0 to 99 are themselves (setUTCFullYear: Date.UTC
 * reads them as 1900 to 1999). The API's time parameters and the CLI's time options
 * share it.
 */
export function isRealDate(s: string): boolean {
  const m = /^(\d+)-(\d+)-(\d+)T(\d+):(\d+)(?::(\d+))?/.exec(s);
  if (m === null) return false;
  const [y, mo, d, h, mi, se] = m.slice(1).map((x) => Number(x ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const t = new Date(0);
  t.setUTCFullYear(y, mo - 1, d);
  t.setUTCHours(h, mi, se);
  return (
    t.getUTCFullYear() === y &&
    t.getUTCMonth() === mo - 1 &&
    t.getUTCDate() === d &&
    t.getUTCHours() === h &&
    t.getUTCMinutes() === mi &&
    t.getUTCSeconds() === se
  );
}
