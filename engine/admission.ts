/**
 * The one admission path for compute tasks outside a run's steps (tool runs, renders, viewer
 * preparations), the same in both modes: the task enters its organization's queue as a claim
 * in a ClaimStore (`claimSlots`, on the side that waits), and the process that holds the
 * ledger admits claims in the same first-come-first-served allocation as run steps
 * (`startAdmission`, a small level-triggered loop keyed by organization). In embedded mode
 * both sides are this process and the store is memory (`MemoryClaims`); in cluster mode the
 * api-server replicas wait and the operator admits, through Lease objects. A claim whose
 * holder stopped renewing it is deleted, so a crashed replica never keeps a slot.
 */
import { randomBytes } from "node:crypto";
import { ulid } from "../core/ids.js";
import type { ClaimStore, Clock, ComputeClaim, SlotGate } from "../core/ports.js";
import type { Ledger, ObservedClaims } from "../core/quota.js";
import { runWorkers, WorkQueue } from "./workqueue.js";

/** How long a claim lives without a renewal (its holder renews it three times as often). */
export const CLAIM_TTL_MS = 30_000;

/** A fresh claim id: time-ordered, lowercase, valid as a Kubernetes object name's suffix. */
export const newClaimId = (now: number) => `c-${ulid(now, randomBytes(10)).toLowerCase()}`;

/** An organization's claims among `claims`, as the ledger observes them: admitted, or waiting with their place. */
export function observedClaims(claims: readonly ComputeClaim[], organization: string): ObservedClaims {
  const own = claims.filter((c) => c.organization === organization);
  return {
    admitted: own.filter((c) => c.admittedAt !== undefined).map((c) => c.id),
    waiting: own.filter((c) => c.admittedAt === undefined).map((c) => ({ id: c.id, createdAt: c.createdAt })),
  };
}

/** Claims in this process's memory (embedded mode, tests). */
export class MemoryClaims implements ClaimStore {
  private readonly claims = new Map<string, ComputeClaim>();
  private readonly watchers = new Set<(organization: string, id: string) => void>();
  private version = 0;

  private changed(c: ComputeClaim): void {
    for (const w of [...this.watchers]) queueMicrotask(() => w(c.organization, c.id));
  }

  async create(claim: Omit<ComputeClaim, "renewedAt" | "admittedAt">): Promise<void> {
    if (this.claims.has(claim.id)) throw new Error(`claim ${claim.id} exists`);
    const c: ComputeClaim = { ...claim, renewedAt: String(++this.version) };
    this.claims.set(c.id, c);
    this.changed(c);
  }

  async get(id: string): Promise<ComputeClaim | undefined> {
    const c = this.claims.get(id);
    return c ? { ...c } : undefined;
  }

  async list(): Promise<ComputeClaim[]> {
    return [...this.claims.values()].map((c) => ({ ...c }));
  }

  async admit(id: string, at: number): Promise<boolean> {
    const c = this.claims.get(id);
    if (!c) return false;
    this.claims.set(id, { ...c, admittedAt: at });
    this.changed(c);
    return true;
  }

  async renew(id: string): Promise<boolean> {
    const c = this.claims.get(id);
    if (!c) return false;
    this.claims.set(id, { ...c, renewedAt: String(++this.version) });
    return true;
  }

  async delete(id: string): Promise<void> {
    const c = this.claims.get(id);
    if (!c) return;
    this.claims.delete(id);
    this.changed(c);
  }

  watch(onChange: (organization: string, id: string) => void): () => void {
    this.watchers.add(onChange);
    return () => this.watchers.delete(onChange);
  }
}

export interface ClaimSlotsOptions {
  claims: ClaimStore;
  clock: Clock;
  /** This process, as the holder written into its claims. */
  holder: string;
  ttlMs?: number;
}

/**
 * The waiting side: each call creates a claim, renews it while it waits and while the task
 * runs, and resolves once the admitting side marked it admitted; the release (or an abort
 * while waiting) deletes it. A claim deleted before its admission (it expired: this process
 * could not renew it in time) fails the wait.
 */
export function claimSlots(o: ClaimSlotsOptions): SlotGate {
  const ttlMs = o.ttlMs ?? CLAIM_TTL_MS;
  return async (organization, task, signal, kind = "tool") => {
    const id = newClaimId(o.clock.now());
    let settle!: (admitted: boolean) => void;
    const outcome = new Promise<boolean>((resolve) => { settle = resolve; });
    let created = false;
    const check = async () => {
      const c = await o.claims.get(id);
      if (c?.admittedAt !== undefined) settle(true);
      else if (!c && created) settle(false);
    };
    const unwatch = o.claims.watch((_org, changed) => { if (changed === id) check().catch(() => undefined); });
    const renewal = setInterval(() => {
      if (!created) return; // still being created: nothing to renew yet
      o.claims.renew(id, o.clock.now()).then((alive) => { if (!alive) settle(false); }, () => undefined);
    }, Math.max(10, Math.floor(ttlMs / 3)));
    renewal.unref?.();
    const onAbort = () => settle(false);
    signal.addEventListener("abort", onAbort, { once: true });
    const giveUp = () => { clearInterval(renewal); void o.claims.delete(id).catch(() => undefined); };
    try {
      if (signal.aborted) throw new Error("aborted");
      await o.claims.create({ id, organization, kind, task, holder: o.holder, createdAt: o.clock.now(), ttlMs });
      created = true;
      await check();
      const admitted = await outcome;
      if (signal.aborted) throw new Error("aborted");
      if (!admitted) throw new Error(`the compute claim for ${task} expired before its turn came`);
    } catch (e) {
      giveUp();
      throw e;
    } finally {
      unwatch();
      signal.removeEventListener("abort", onAbort);
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      giveUp();
    };
  };
}

export interface AdmissionOptions {
  claims: ClaimStore;
  ledger: Ledger;
  clock: Clock;
  /** A pass released slots (claims ended or expired) and one is free: the organization's waiting runs may start a step. */
  onSlotFree?: (organization: string) => void;
  onError?: (organization: string, error: unknown) => void;
}

/**
 * The admitting side (where the ledger is): one reconcile per organization, level-triggered
 * from the claims as listed. It deletes claims not renewed within their ttl (as seen on this
 * process's clock, so clock skew between replicas does not matter), tells the ledger what it
 * saw, and admits the claims the organization's allocation reaches, their slots assumed
 * before the writes so no run reconcile spends them meanwhile.
 */
export function startAdmission(o: AdmissionOptions) {
  const queue = new WorkQueue<string>({ baseDelayMs: 50, maxDelayMs: 5_000 });
  /** Per claim: its organization, the last renewal seen and when this process saw it change. */
  const renewals = new Map<string, { org: string; renewedAt: string; seenAt: number }>();

  async function reconcile(org: string): Promise<{ requeueAfterMs?: number }> {
    const now = o.clock.now();
    const heldBefore = o.ledger.inUse(org);
    const listed = (await o.claims.list()).filter((c) => c.organization === org);
    const ids = new Set(listed.map((c) => c.id));
    for (const [id, r] of renewals) if (r.org === org && !ids.has(id)) renewals.delete(id);
    const live: ComputeClaim[] = [];
    let nextCheck = Infinity;
    for (const c of listed) {
      let r = renewals.get(c.id);
      if (!r || r.renewedAt !== c.renewedAt) { r = { org, renewedAt: c.renewedAt, seenAt: now }; renewals.set(c.id, r); }
      const left = r.seenAt + c.ttlMs - now;
      if (left < 0) {
        await o.claims.delete(c.id);
        renewals.delete(c.id);
        continue;
      }
      nextCheck = Math.min(nextCheck, left + 1);
      live.push(c);
    }
    o.ledger.observeClaims(org, observedClaims(live, org));
    const admit = o.ledger.admittedTasks(org);
    for (const id of admit) o.ledger.assume(org, id, [id]);
    for (const [i, id] of admit.entries()) {
      let written: boolean;
      try {
        written = await o.claims.admit(id, o.clock.now());
      } catch (e) {
        for (const rest of admit.slice(i)) o.ledger.undo(org, rest, rest);
        throw e;
      }
      if (!written) o.ledger.undo(org, id, id);
    }
    // Slots this pass gave back (claims released or expired) may go to runs waiting behind them.
    const held = o.ledger.inUse(org);
    if (held < heldBefore && held < o.ledger.limit(org)) o.onSlotFree?.(org);
    return Number.isFinite(nextCheck) ? { requeueAfterMs: nextCheck } : {};
  }

  const unwatch = o.claims.watch((org) => queue.add(org));
  const done = (async () => {
    try {
      for (const org of new Set((await o.claims.list()).map((c) => c.organization))) queue.add(org);
    } catch (e) {
      o.onError?.("*", e);
    }
    await runWorkers(queue, 1, reconcile, (org, e) => o.onError?.(org, e));
  })();
  return {
    /** Claims whose renewals it follows (pruned once they are gone). */
    cacheSizes: () => ({ renewals: renewals.size }),
    /** Looks at the organization's claims again (a slot may have freed). */
    enqueue: (org: string) => queue.add(org),
    async stop(): Promise<void> {
      unwatch();
      queue.shutDown();
      await done;
    },
  };
}
