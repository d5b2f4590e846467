/**
 * Turns that run in this process, by conversation id, each with its event log (the events
 * of POST /v1/query/stream). A turn runs on its own, not tied to the HTTP connection that
 * started it: a client that goes away does not stop it, it completes and is recorded
 * (assistant/query.ts), and a client may come back and read its events after the last one
 * it saw (Last-Event-ID) and the rest live. `stop` aborts a running turn. A finished turn's
 * log is kept a little while so that a late reconnect still gets its end.
 */
import { randomBytes } from "node:crypto";
import type { AuthContext } from "../services/access.js";
import { OperonError } from "../core/errors.js";
import type { TurnEvent, TurnProgress } from "./agent.js";
import { runQuery, type QueryAnswer, type QueryDeps, type QueryRequest, type TurnStart } from "./query.js";

export type StreamEventType = "status" | "content" | "tool_call" | "tool_result" | "pending_action" | "done" | "error";

/** A tool call waiting for the user's confirmation (require_confirmation). */
export interface PendingAction { action_id: string; tool: string; input: unknown }

/** A turn's answer, or (paused) what it has done so far and the action it waits on. */
export type TurnAnswer = QueryAnswer & { pending_action?: PendingAction };

/** One event of a turn: its sequence number (from 1), its type, and the JSON `data` (which repeats the type). */
export interface StreamEvent { id: number; type: StreamEventType; data: Record<string, unknown> & { type: StreamEventType } }

type Listener = { onEvent: (e: StreamEvent) => void; onEnd: () => void };

export class RunningTurn {
  readonly events: StreamEvent[] = [];
  finished = false;
  /** The action waiting for confirmation, with what the turn has done so far. */
  pending: { action: PendingAction; progress: TurnProgress; decide: (approve: boolean) => void } | undefined;
  /** The turn's answer, or its error (set by the registry when it starts). */
  outcome: Promise<QueryAnswer> = Promise.resolve(undefined as never);
  private readonly listeners = new Set<Listener>();
  private readonly pauseWaiters = new Set<() => void>();
  constructor(readonly start: TurnStart, readonly abort: AbortController) {}

  pause(action: PendingAction, progress: TurnProgress, decide: (approve: boolean) => void): void {
    this.pending = { action, progress, decide };
    this.push("pending_action", { ...action, conversation_id: this.start.conversation_id });
    for (const w of this.pauseWaiters) w();
    this.pauseWaiters.clear();
  }

  /** The answer once the turn ends, or what it has done and its pending action once it pauses, whichever comes first. */
  next(): Promise<TurnAnswer> {
    const paused = (): TurnAnswer | undefined => {
      const p = this.pending;
      return p && {
        conversation_id: this.start.conversation_id, message_id: this.start.message_id, answer: "",
        tool_calls: [...p.progress.tool_calls], model: p.progress.model, usage: { ...p.progress.usage }, pending_action: p.action,
      };
    };
    const now = paused();
    if (now) return Promise.resolve(now);
    let waiter: () => void = () => {};
    const onPause = new Promise<TurnAnswer>((resolve) => { waiter = () => { const p = paused(); if (p) resolve(p); }; this.pauseWaiters.add(waiter); });
    return Promise.race([this.outcome, onPause]).finally(() => this.pauseWaiters.delete(waiter));
  }

  push(type: StreamEventType, data: Record<string, unknown>): void {
    const e: StreamEvent = { id: this.events.length + 1, type, data: { type, ...data } };
    this.events.push(e);
    for (const l of this.listeners) l.onEvent(e);
  }

  end(): void {
    this.finished = true;
    this.pending = undefined;
    for (const l of this.listeners) l.onEnd();
    this.listeners.clear();
  }

  /** The events after `after`, then the rest as they come; `onEnd` once the turn has finished. Returns the unsubscribe. */
  subscribe(after: number, onEvent: (e: StreamEvent) => void, onEnd: () => void): () => void {
    for (const e of this.events) if (e.id > after) onEvent(e);
    if (this.finished) {
      onEnd();
      return () => {};
    }
    const l: Listener = { onEvent, onEnd };
    this.listeners.add(l);
    return () => { this.listeners.delete(l); };
  }
}

function dataOf(e: TurnEvent): Record<string, unknown> {
  switch (e.type) {
    case "content": return { delta: e.delta };
    case "tool_call": return { id: e.id, tool: e.tool, input: e.input };
    case "tool_result": return { id: e.id, tool: e.tool, status: e.status, summary: e.summary };
  }
}

export class TurnRegistry {
  private readonly turns = new Map<string, RunningTurn>();
  /** How long a finished turn's events stay for a reconnect, in ms. */
  constructor(private readonly retainMs = 120_000) {}

  /**
   * Starts a turn; resolves once it has started (its first event, `status`, carries the
   * conversation id), or rejects with the request's error (unknown workspace or
   * conversation, no provider, the conversation already has a running turn).
   */
  start(deps: QueryDeps, auth: AuthContext, req: QueryRequest & { require_confirmation?: boolean | undefined; stream?: boolean }, log?: (err: unknown) => void): Promise<RunningTurn> {
    return new Promise<RunningTurn>((resolve, reject) => {
      const abort = new AbortController();
      let turn: RunningTurn | undefined;
      const confirm = (call: { id: string; tool: string; input: unknown }, progress: TurnProgress) => new Promise<boolean>((decided) => {
        const t = turn;
        if (!t || abort.signal.aborted) { decided(false); return; }
        const onAbort = () => decide(false);
        const decide = (approve: boolean) => { abort.signal.removeEventListener("abort", onAbort); t.pending = undefined; decided(approve); };
        abort.signal.addEventListener("abort", onAbort, { once: true });
        t.pause({ action_id: `act-${randomBytes(8).toString("hex")}`, tool: call.tool, input: call.input }, progress, decide);
      });
      let settle: { resolve: (a: QueryAnswer) => void; reject: (e: unknown) => void } = { resolve: () => {}, reject: () => {} };
      const outcome = new Promise<QueryAnswer>((resolve, reject) => { settle = { resolve, reject }; });
      outcome.catch(() => {}); // a streamed turn's error is an event; nobody need await it
      runQuery(deps, auth, req, {
        signal: abort.signal,
        ...(req.require_confirmation ? { confirm } : {}), ...(req.stream ? { stream: true } : {}),
        ...(log ? { log } : {}),
        onStart: (s) => {
          if (this.turns.get(s.conversation_id)?.finished === false) {
            throw new OperonError("conflict", `conversation_id: conversation ${JSON.stringify(s.conversation_id)} has a turn running; wait for it to finish or stop it (POST /v1/query/stop)`, { field: "conversation_id" });
          }
          turn = new RunningTurn(s, abort);
          turn.outcome = outcome;
          this.turns.set(s.conversation_id, turn);
          turn.push("status", { status: "started", conversation_id: s.conversation_id, workspace_id: s.workspace_id });
          resolve(turn);
        },
        onEvent: (e) => turn?.push(e.type, dataOf(e)),
      }).then((answer) => {
        if (!turn) return;
        turn.push("done", { answer: answer.answer, conversation_id: answer.conversation_id, message_id: answer.message_id, model: answer.model, usage: answer.usage, ...(abort.signal.aborted ? { stopped: true } : {}) });
        this.finish(turn);
        settle.resolve(answer);
      }, (err: unknown) => {
        if (!turn) { reject(err); return; }
        settle.reject(err);
        const e = err instanceof OperonError ? err : undefined;
        if (!e) log?.(err);
        turn.push("error", { code: e?.code ?? "internal_error", message: e?.message ?? "the turn failed unexpectedly", conversation_id: turn.start.conversation_id });
        this.finish(turn);
      });
    });
  }

  private finish(turn: RunningTurn): void {
    turn.end();
    const id = turn.start.conversation_id;
    setTimeout(() => { if (this.turns.get(id) === turn) this.turns.delete(id); }, this.retainMs).unref();
  }

  /** The turn of this conversation (running, or finished a short while ago) if the key may see it. */
  get(auth: AuthContext, conversationId: string): RunningTurn | undefined {
    const turn = this.turns.get(conversationId);
    if (!turn || turn.start.organization !== auth.organization) return undefined;
    if (auth.workspaces !== null && !auth.workspaces.has(turn.start.workspace_id)) return undefined;
    return turn;
  }

  /**
   * Answers the pending action of the conversation's turn (it must be `actionId`): the tool
   * runs, or the model is told the user declined. 404 when there is no such pending action.
   */
  confirm(auth: AuthContext, conversationId: string, actionId: string, approve: boolean): RunningTurn {
    const turn = this.get(auth, conversationId);
    if (!turn || turn.finished) throw new OperonError("not_found", `conversation_id: no running turn for conversation ${JSON.stringify(conversationId)}`, { field: "conversation_id" });
    if (turn.pending?.action.action_id !== actionId) throw new OperonError("not_found", `action_id: no pending action ${JSON.stringify(actionId)} in this conversation${turn.pending ? ` (pending: ${turn.pending.action.action_id})` : ""}`, { field: "action_id" });
    turn.pending.decide(approve);
    return turn;
  }

  /** Stops every running turn (the server is closing). */
  stopAll(): void {
    for (const turn of this.turns.values()) if (!turn.finished) turn.abort.abort();
  }

  /** Stops a running turn; false when there is none the key may see. */
  stop(auth: AuthContext, conversationId: string): boolean {
    const turn = this.get(auth, conversationId);
    if (!turn || turn.finished) return false;
    turn.abort.abort();
    return true;
  }
}
