/** How the simulation benchmarks print their cells: medians over seeds with their spread. */
export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
export const fmt = (x, d = 2) => x.toFixed(d);
export const pct = (x) => `${(100 * x).toFixed(0)}%`;
/** "median (min–max)". */
export const range = (xs) => `${fmt(median(xs))} (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))})`;
