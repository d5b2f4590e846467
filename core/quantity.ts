/**
 * Kubernetes resource quantities ("500m", "4", "16Gi", "1e3") as plain strings that are checked
 * and compared here, shared by the pipeline spec (a step's `resources`) and the step-pod
 * configuration (core/kubernetes/step-pods.ts). Only non-negative values: a request is never
 * negative. The number a quantity stands for is for comparing and deriving (threads from a CPU
 * count); the string the user wrote is what goes into a pod.
 */

/** Kubernetes' quantity grammar without a sign: a decimal number and a binary, decimal or exponent suffix. */
export const QUANTITY = /^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[mkMGTPE])?$/;

export const QUANTITY_MESSAGE = "must be a Kubernetes quantity such as \"500m\", \"4\" or \"16Gi\"";

const BINARY: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const DECIMAL: Record<string, number> = { m: 1e-3, "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };

/** The value of a quantity (cores for CPU, bytes for memory and storage); undefined when it is not one. */
export function quantityValue(q: string): number | undefined {
  const m = QUANTITY.exec(q);
  if (!m) return undefined;
  const n = Number(m[1]);
  const suffix = m[3] ?? "";
  if (/^[eE][+-]?\d+$/.test(suffix)) return n * 10 ** Number(suffix.slice(1));
  const factor = BINARY[suffix] ?? DECIMAL[suffix];
  return factor === undefined ? undefined : n * factor;
}

/** Whether `q` is a well-formed quantity. */
export const isQuantity = (q: string): boolean => quantityValue(q) !== undefined;

/** Compares two well-formed quantities of the same resource: negative, zero or positive. */
export function compareQuantities(a: string, b: string): number {
  return (quantityValue(a) ?? 0) - (quantityValue(b) ?? 0);
}
