/**
 * Claims for compute slots as Lease objects (coordination.k8s.io/v1) in the release's
 * namespace, so every api-server replica and the operator see one queue: a replica creates
 * one Lease per task waiting for a slot (a render, a viewer preparation) and renews it, the
 * operator marks it admitted, the replica deletes it when the task ends. Leases fit: they
 * are small, renewable, and an operator already reads its own. The claim's fields live in
 * annotations (`operon.dev/…`); the label `operon.dev/claim=compute` selects them. This
 * adapter stores and reports; the engine's admission loop decides (engine/admission.ts).
 */
import type { ClaimKind, ClaimStore, ComputeClaim } from "../../core/ports.js";
import { isNotFound, paths, type KubeClient } from "./client.js";
import { Informer, type KubeObject } from "./informer.js";
import { micro } from "./leader.js";

export const CLAIM_LABEL = "operon.dev/claim";
const A = {
  organization: "operon.dev/organization",
  kind: "operon.dev/claim-kind",
  task: "operon.dev/task",
  createdAt: "operon.dev/queued-at-ms",
  ttl: "operon.dev/ttl-ms",
  admittedAt: "operon.dev/admitted-at-ms",
} as const;

interface ClaimLease extends KubeObject {
  spec?: { holderIdentity?: string | null; leaseDurationSeconds?: number; acquireTime?: string | null; renewTime?: string | null };
}

const PREFIX = "operon-claim-";

function toClaim(l: ClaimLease): ComputeClaim | undefined {
  const a = l.metadata.annotations ?? {};
  const organization = a[A.organization];
  const createdAt = Number(a[A.createdAt]);
  const ttlMs = Number(a[A.ttl]);
  if (!organization || !l.metadata.name.startsWith(PREFIX) || !Number.isFinite(createdAt) || !(ttlMs > 0)) return undefined;
  const admitted = a[A.admittedAt] === undefined ? undefined : Number(a[A.admittedAt]);
  return {
    id: l.metadata.name.slice(PREFIX.length),
    organization,
    kind: (a[A.kind] ?? "tool") as ClaimKind,
    task: a[A.task] ?? "",
    holder: l.spec?.holderIdentity ?? "",
    createdAt,
    ttlMs,
    renewedAt: l.spec?.renewTime ?? l.metadata.resourceVersion ?? "",
    ...(admitted !== undefined && Number.isFinite(admitted) ? { admittedAt: admitted } : {}),
  };
}

export interface KubeClaimsOptions {
  client: KubeClient;
  namespace: string;
  onError?: (e: unknown) => void;
}

/** The claim store on Lease objects, read from a watched cache. `start()` before use. */
export class KubeClaims implements ClaimStore {
  private readonly informer: Informer<ClaimLease>;
  private readonly watchers = new Set<(organization: string, id: string) => void>();

  constructor(private readonly o: KubeClaimsOptions) {
    this.informer = new Informer<ClaimLease>({
      client: o.client, path: paths.leases(o.namespace), labelSelector: `${CLAIM_LABEL}=compute`,
      accept: (l) => l.metadata.labels?.[CLAIM_LABEL] === "compute",
      onChange: (l) => {
        const c = toClaim(l);
        if (c) for (const w of [...this.watchers]) w(c.organization, c.id);
      },
      ...(o.onError ? { onError: o.onError } : {}),
    });
  }

  start(): Promise<void> { return this.informer.start(); }
  stop(): void { this.informer.stop(); }

  private url(id: string): string { return `${paths.leases(this.o.namespace)}/${PREFIX}${id}`; }

  async create(c: Omit<ComputeClaim, "renewedAt" | "admittedAt">): Promise<void> {
    if (!/^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$/.test(c.id)) throw new Error(`claim id ${JSON.stringify(c.id)} is not a valid name`);
    const now = Date.now();
    const written = await this.o.client.request<ClaimLease>("POST", paths.leases(this.o.namespace), {
      body: {
        apiVersion: "coordination.k8s.io/v1", kind: "Lease",
        metadata: {
          name: `${PREFIX}${c.id}`,
          labels: { [CLAIM_LABEL]: "compute" },
          annotations: { [A.organization]: c.organization, [A.kind]: c.kind, [A.task]: c.task.slice(0, 200), [A.createdAt]: String(c.createdAt), [A.ttl]: String(c.ttlMs) },
        },
        spec: { holderIdentity: c.holder, leaseDurationSeconds: Math.max(1, Math.ceil(c.ttlMs / 1000)), acquireTime: micro(now), renewTime: micro(now) },
      },
    });
    this.informer.assume(written);
  }

  async get(id: string): Promise<ComputeClaim | undefined> {
    const l = this.informer.get(`${PREFIX}${id}`);
    return l ? toClaim(l) : undefined;
  }

  async list(): Promise<ComputeClaim[]> {
    return this.informer.list().map(toClaim).filter((c): c is ComputeClaim => c !== undefined);
  }

  private async patch(id: string, body: unknown): Promise<boolean> {
    try {
      this.informer.assume(await this.o.client.request<ClaimLease>("PATCH", this.url(id), { body, patch: "merge" }));
      return true;
    } catch (e) {
      if (isNotFound(e)) return false;
      throw e;
    }
  }

  admit(id: string, at: number): Promise<boolean> {
    return this.patch(id, { metadata: { annotations: { [A.admittedAt]: String(at) } } });
  }

  renew(id: string, at: number): Promise<boolean> {
    return this.patch(id, { spec: { renewTime: micro(at) } });
  }

  async delete(id: string): Promise<void> {
    try {
      await this.o.client.request("DELETE", this.url(id));
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }

  watch(onChange: (organization: string, id: string) => void): () => void {
    this.watchers.add(onChange);
    return () => this.watchers.delete(onChange);
  }
}
