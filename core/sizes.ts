/** Byte counts as people read them, one rule for the CLI and the viewer pages: 1536 → "1.5 KB". */
export function humanSize(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let v = n;
  let u = -1;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[u]}`;
}

/** A bound in exact binary units, as limits are set: "64 MiB", "8 GiB", "1500 KiB". */
export function boundSize(n: number): string {
  for (const [unit, size] of [["TiB", 2 ** 40], ["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]] as const) {
    if (n >= size && n % size === 0) return `${n / size} ${unit}`;
  }
  return n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MiB` : `${n} bytes`;
}
