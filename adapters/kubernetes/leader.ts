/**
 * Leader election on a `coordination.k8s.io/v1` Lease, the way client-go does it, so that of
 * several operator replicas exactly one acts. A replica takes the Lease when it is absent,
 * held by nobody, or not renewed for `leaseDurationMs` as seen on this replica's own clock
 * (never comparing clocks across machines).
 *
 * From the moment the Lease is taken, renewal runs on its own timer (every `retryPeriodMs`,
 * with the resourceVersion as precondition), beside `onStartedLeading`: a slow start-up (an
 * informer sync against a slow API server) never holds renewals back. Each renewal attempt
 * has a deadline — what is left of the renew deadline — so a request that hangs counts as a
 * failed renewal. When no renewal succeeded within `renewDeadlineMs`, or another replica is
 * seen holding the Lease, this replica gives up leading (`onStoppedLeading`, awaited: the
 * caller stops acting there), then campaigns again like a fresh replica. A start-up that
 * fails gives up leading too, and releases the Lease so another replica can take it at once.
 * On a clean stop a leader releases the Lease.
 */
import { isAlreadyExists, isConflict, isNotFound, paths, type KubeClient } from "./client.js";
import { messageOf } from "../../core/errors.js";

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
  /** Runs beside the renewals; a rejection gives up leading (and releases the Lease). */
  onStartedLeading: () => void | Promise<void>;
  /** Leadership is lost: stop acting. Campaigning resumes once this has resolved. */
  onStoppedLeading: (why: string) => void | Promise<void>;
  onError?: (e: unknown) => void;
  now?: () => number;
}

/** A time as a Lease field wants it (MicroTime: microseconds, UTC). */
export const micro = (ms: number) => new Date(ms).toISOString().replace("Z", "000Z");

/** What one attempt to take or renew the Lease found. */
type Attempt = "ours" | "held" | "failed";

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
  /** Aborts the requests in flight and wakes the loop (stop). */
  private readonly abort = new AbortController();
  /** Wakes the loop early (a failed start-up, a stop). */
  private wake: (() => void) | undefined;
  /** How many times leadership was taken (tests, logs). */
  terms = 0;

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
      while (!this.stopped) {
        // Campaign: retry until the Lease is ours.
        let acquiredAt: number | undefined;
        while (!this.stopped) {
          const at = this.now();
          if ((await this.tryAcquireOrRenew(at + this.renewDeadlineMs)) === "ours") { acquiredAt = at; break; }
          await this.pause(this.retryPeriodMs);
        }
        if (this.stopped || acquiredAt === undefined) return;
        await this.lead(acquiredAt);
      }
    })();
  }

  /** One term: start-up beside renewals, until leadership is lost or the elector stops. */
  private async lead(acquiredAt: number): Promise<void> {
    this.leading = true;
    this.terms++;
    let startFailed: unknown;
    let failedStart = false;
    void (async () => { await this.o.onStartedLeading(); })().catch((e: unknown) => {
      startFailed = e;
      failedStart = true;
      this.wake?.();
    });
    let lastRenew = acquiredAt;
    let why: string | undefined;
    while (!this.stopped) {
      await this.pause(this.retryPeriodMs);
      if (this.stopped) break;
      if (failedStart) { why = `start-up failed: ${messageOf(startFailed)}`; break; }
      const at = this.now();
      const deadline = lastRenew + this.renewDeadlineMs;
      if (at >= deadline) { why = `not renewed within ${this.renewDeadlineMs} ms`; break; }
      const r = await this.tryAcquireOrRenew(deadline);
      if (this.stopped) break;
      if (r === "ours") lastRenew = at;
      else if (r === "held") { why = "another replica holds the Lease"; break; }
      else if (this.now() >= deadline) { why = `not renewed within ${this.renewDeadlineMs} ms`; break; }
      if (failedStart) { why = `start-up failed: ${messageOf(startFailed)}`; break; }
    }
    if (this.stopped) return; // stop() releases the Lease
    this.leading = false;
    if (failedStart) {
      this.o.onError?.(startFailed);
      await this.release();
    }
    try { await this.o.onStoppedLeading(why ?? "stopped"); } catch (e) { this.o.onError?.(e); }
    await this.pause(this.retryPeriodMs);
  }

  /** Sleeps, or less when woken (stop, a failed start-up). */
  private pause(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => { clearTimeout(timer); if (this.wake === done) this.wake = undefined; resolve(); };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }

  /** Stops; a leader releases the Lease (another replica can take it at once). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    this.wake?.();
    await this.loop;
    if (!this.leading) return;
    this.leading = false;
    await this.release();
  }

  /** Gives the Lease up if this replica holds it (best effort). */
  private async release(): Promise<void> {
    try {
      const lease = await this.get(this.now() + this.renewDeadlineMs, undefined);
      if (lease?.spec?.holderIdentity === this.o.identity) {
        await this.o.client.request("PUT", `${paths.leases(this.o.namespace)}/${this.o.name}`, {
          body: { ...lease, spec: { ...lease.spec, holderIdentity: null, leaseDurationSeconds: 1, acquireTime: null, renewTime: micro(this.now()) } },
          timeoutMs: this.renewDeadlineMs,
        });
      }
    } catch (e) { this.o.onError?.(e); }
  }

  /** Time left until `deadline` as a request deadline; throws when none is left. */
  private left(deadline: number): number {
    const ms = deadline - this.now();
    if (ms <= 0) throw new Error(`leader election: no time left for the request (deadline passed)`);
    return Math.ceil(ms);
  }

  private async get(deadline: number, signal: AbortSignal | undefined): Promise<Lease | undefined> {
    try {
      return await this.o.client.request<Lease>("GET", `${paths.leases(this.o.namespace)}/${this.o.name}`, { timeoutMs: this.left(deadline), ...(signal ? { signal } : {}) });
    } catch (e) { if (isNotFound(e)) return undefined; throw e; }
  }

  /** Takes or renews the Lease; every request ends by `deadline`. */
  private async tryAcquireOrRenew(deadline: number): Promise<Attempt> {
    const now = this.now();
    const signal = this.abort.signal;
    const spec = { holderIdentity: this.o.identity, leaseDurationSeconds: Math.ceil(this.leaseDurationMs / 1000), renewTime: micro(now) };
    try {
      const lease = await this.get(deadline, signal);
      if (!lease) {
        await this.o.client.request("POST", paths.leases(this.o.namespace), {
          body: { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name: this.o.name, namespace: this.o.namespace }, spec: { ...spec, acquireTime: micro(now), leaseTransitions: 0 } },
          timeoutMs: this.left(deadline), signal,
        });
        this.observed = undefined;
        return "ours";
      }
      const holder = lease.spec?.holderIdentity ?? "";
      const key = `${holder}|${lease.spec?.renewTime ?? ""}|${lease.metadata.resourceVersion ?? ""}`;
      if (!this.observed || this.observed.key !== key) this.observed = { key, at: now };
      const durationMs = (lease.spec?.leaseDurationSeconds ?? Math.ceil(this.leaseDurationMs / 1000)) * 1000;
      const mine = holder === this.o.identity;
      if (holder && !mine && this.observed.at + durationMs > now) return "held"; // someone else holds it
      const transitions = (lease.spec?.leaseTransitions ?? 0) + (mine ? 0 : 1);
      await this.o.client.request("PUT", `${paths.leases(this.o.namespace)}/${this.o.name}`, {
        body: { ...lease, spec: { ...lease.spec, ...spec, acquireTime: mine ? (lease.spec?.acquireTime ?? micro(now)) : micro(now), leaseTransitions: transitions } },
        timeoutMs: this.left(deadline), signal,
      });
      return "ours";
    } catch (e) {
      if (!this.stopped && !isConflict(e) && !isAlreadyExists(e)) this.o.onError?.(e);
      return "failed";
    }
  }
}
