/**
 * Typed arrays that grow as rows stream in: a table of a million rows is kept as numbers in a
 * few flat arrays (doubling when full), never as one object per row.
 */

/** A growable Float64Array: `a` holds the values, the first `n` of them in use. */
export class GrowableF64 {
  a: Float64Array;
  n = 0;
  constructor(capacity = 1024) { this.a = new Float64Array(capacity); }
  push(v: number) {
    if (this.n === this.a.length) { const b = new Float64Array(this.a.length * 2); b.set(this.a); this.a = b; }
    this.a[this.n++] = v;
  }
}

/** A growable Uint16Array (small indices, such as a chromosome's). */
export class GrowableU16 {
  a: Uint16Array;
  n = 0;
  constructor(capacity = 1024) { this.a = new Uint16Array(capacity); }
  push(v: number) {
    if (this.n === this.a.length) { const b = new Uint16Array(this.a.length * 2); b.set(this.a); this.a = b; }
    this.a[this.n++] = v;
  }
}
