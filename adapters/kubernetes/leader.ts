/**
 * Leader election on a `coordination.k8s.io/v1` Lease, the way client-go does it, so that of
 * several operator replicas exactly one acts. A replica takes the Lease when it is absent,
 * held by nobody, or not renewed for `leaseDurationMs` as seen on this replica's own clock
 * (never comparing clocks across machines); the leader renews every `retryPeriodMs` with the
 * resourceVersion as precondition, and gives up leading — `onStoppedLeading`, after which the
 * process should exit — if it could not renew within `renewDeadlineMs`. On a clean stop it
 * releases the Lease so another replica takes over at once.
 */
import { isAlreadyExists, isConflict, isNotFound, paths, type KubeClient } from "./client.js";

interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string };
  spec?: { holderIdentity?: string | null; leaseDurationSeconds?: number; acquireTime?: string | null; renewTime?: string | null; leaseTransitions?: number };
}

export interface LeaderElectionOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  onStartedLeading: () => void | Promise<void>;
  onStoppedLeading: () => void;
  onError?: (e: unknown) => void;
  now?: () => number;
}

const micro = (ms: number) => new Date(ms).toISOString().replace("Z", "000Z");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class LeaderElector {
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly now: () => number;
  private stopped = false;
  private leading = false;
  /** The last Lease record seen, and when this replica saw it change. */
  private observed: { key: string; at: number } | undefined;
  private loop: Promise<void> | undefined;

  constructor(private readonly o: LeaderElectionOptions) {
    this.leaseDurationMs = o.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = o.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = o.retryPeriodMs ?? 2_000;
    this.now = o.now ?? (() => Date.now());
    if (!(this.leaseDurationMs > this.renewDeadlineMs && this.renewDeadlineMs > this.retryPeriodMs)) throw new Error("leader election: need leaseDuration > renewDeadline > retryPeriod");
  }

  isLeader(): boolean { return this.leading; }

  start(): void {
    this.loop = (async () => {
      // Acquire: retry until the Lease is ours.
      while (!this.stopped && !(await this.tryAcquireOrRenew())) await sleep(this.retryPeriodMs);
      if (this.stopped) return;
      this.leading = true;
      try { await this.o.onStartedLeading(); } catch (e) { this.o.onError?.(e); }
      // Renew: give up when renewal has not succeeded within the renew deadline.
      let lastRenew = this.now();
      while (!this.stopped) {
        await sleep(this.retryPeriodMs);
        if (this.stopped) break;
        if (await this.tryAcquireOrRenew()) lastRenew = this.now();
        else if (this.now() - lastRenew > this.renewDeadlineMs) {
          this.leading = false;
          this.o.onStoppedLeading();
          return;
        }
      }
    })();
  }

  /** Stops; a leader releases the Lease (another replica can take it at once). */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    if (!this.leading) return;
    this.leading = false;
    try {
      const lease = await this.get();
      if (lease?.spec?.holderIdentity === this.o.identity) {
        await this.o.client.request("PUT", `${paths.leases(this.o.namespace)}/${this.o.name}`, {
          body: { ...lease, spec: { ...lease.spec, holderIdentity: null, leaseDurationSeconds: 1, acquireTime: null, renewTime: micro(this.now()) } },
        });
      }
    } catch (e) { this.o.onError?.(e); }
  }

  private async get(): Promise<Lease | undefined> {
    try { return await this.o.client.request<Lease>("GET", `${paths.leases(this.o.namespace)}/${this.o.name}`); } catch (e) { if (isNotFound(e)) return undefined; throw e; }
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = this.now();
    const spec = { holderIdentity: this.o.identity, leaseDurationSeconds: Math.ceil(this.leaseDurationMs / 1000), renewTime: micro(now) };
    try {
      const lease = await this.get();
      if (!lease) {
        await this.o.client.request("POST", paths.leases(this.o.namespace), {
          body: { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name: this.o.name, namespace: this.o.namespace }, spec: { ...spec, acquireTime: micro(now), leaseTransitions: 0 } },
        });
        this.observed = undefined;
        return true;
      }
      const holder = lease.spec?.holderIdentity ?? "";
      const key = `${holder}|${lease.spec?.renewTime ?? ""}|${lease.metadata.resourceVersion ?? ""}`;
      if (!this.observed || this.observed.key !== key) this.observed = { key, at: now };
      const durationMs = (lease.spec?.leaseDurationSeconds ?? Math.ceil(this.leaseDurationMs / 1000)) * 1000;
      const mine = holder === this.o.identity;
      if (holder && !mine && this.observed.at + durationMs > now) return false; // someone else holds it
      const transitions = (lease.spec?.leaseTransitions ?? 0) + (mine ? 0 : 1);
      await this.o.client.request("PUT", `${paths.leases(this.o.namespace)}/${this.o.name}`, {
        body: { ...lease, spec: { ...lease.spec, ...spec, acquireTime: mine ? (lease.spec?.acquireTime ?? micro(now)) : micro(now), leaseTransitions: transitions } },
      });
      return true;
    } catch (e) {
      if (!isConflict(e) && !isAlreadyExists(e)) this.o.onError?.(e);
      return false;
    }
  }
}
