/**
 * The compression check of a submission that names alone cannot settle
 * (core/spec/compression.ts): a `.gz` workspace file given to a parameter that reads bgzip
 * only — a reference for `bcftools mpileup -f`, a VCF for `tabix index` — may be plain gzip.
 * Its first bytes are read from the store (one ranged read per such file), and the run is
 * refused (`unsupported_compression`, at `/input/<name>` or the step's parameter) when it is.
 * What names decide is already refused by `dryBuildSteps`.
 */
import type { ObjectStore } from "../core/ports.js";
import type { Issue } from "../core/issues.js";
import { compressionIssues, compressionProbes } from "../core/spec/compression.js";
import type { PipelineSpec } from "../core/spec/schema.js";
import { COMPRESSION_PROBE_BYTES, compressionFromBytes, type Compression } from "../core/tools/compression.js";
import type { ToolCatalogue } from "../core/tools/index.js";

/** The first bytes of an object (fewer when it is shorter); undefined when it cannot be read. */
async function head(store: ObjectStore, key: string): Promise<Uint8Array | undefined> {
  try {
    const { body } = await store.get(key, { start: 0, end: COMPRESSION_PROBE_BYTES - 1 });
    const chunks: Buffer[] = [];
    let n = 0;
    for await (const c of body as AsyncIterable<Uint8Array>) {
      chunks.push(Buffer.from(c));
      n += c.length;
      if (n >= COMPRESSION_PROBE_BYTES) break;
    }
    return Buffer.concat(chunks).subarray(0, COMPRESSION_PROBE_BYTES);
  } catch {
    // Absent, or an empty object that no range fits: what the tool reads then is not for this check to say.
    return undefined;
  }
}

/**
 * Refusals of plain-gzip files where bgzip is needed, by their bytes. `root` is the
 * workspace's storage prefix; `values` the run's resolved inputs. With `byName`, also what
 * the names decide (for a caller that has not run `dryBuildSteps`, e.g. a single tool run).
 */
export async function compressionRefusals(store: ObjectStore, root: string, spec: Pick<PipelineSpec, "steps" | "inputs">, values: Readonly<Record<string, string>>,
  tools: ToolCatalogue, opts: { referenceVolumes?: readonly string[] | undefined; byName?: boolean } = {}): Promise<Issue[]> {
  const ctx = { tools, ...(opts.referenceVolumes ? { referenceVolumes: opts.referenceVolumes } : {}) };
  const byName = compressionIssues(spec, values, ctx);
  const probes = compressionProbes(spec, values, ctx);
  if (probes.length === 0) return opts.byName ? byName : [];
  const known = new Map<string, Compression>();
  await Promise.all(probes.map(async (path) => {
    const bytes = await head(store, root + path);
    if (bytes) known.set(path, compressionFromBytes(bytes));
  }));
  const all = compressionIssues(spec, values, { ...ctx, known });
  if (opts.byName) return all;
  // Only what the bytes add: what the names decide, dryBuildSteps has refused already.
  const key = (i: Issue) => `${i.path}\n${i.message}`;
  const named = new Set(byName.map(key));
  return all.filter((i) => !named.has(key(i)));
}
