/**
 * A StepExecutor in memory whose steps run until the test ends them: for engine tests that
 * need slots to free at known moments (the reconciler, planner, ledger, controller and run
 * store stay the real ones). `onSubmit` hears each step as it starts.
 */
import { EventEmitter } from "node:events";
import type { ObservedStepState, StepExecutor, StepTask } from "../../core/ports.js";

export function memoryExecutor(onSubmit?: (task: StepTask) => void) {
  const events = new EventEmitter();
  const steps = new Map<string, Map<string, ObservedStepState>>();
  const executor: StepExecutor = {
    submit: async (task) => {
      const m = steps.get(task.runId) ?? new Map<string, ObservedStepState>();
      if (m.has(task.stepId)) return;
      m.set(task.stepId, { phase: "running", attempt: task.attempt, startedAt: Date.now() });
      steps.set(task.runId, m);
      onSubmit?.(task);
      events.emit("c", task.runId);
    },
    observe: async (runId) => new Map([...(steps.get(runId) ?? [])].map(([k, v]) => [k, { ...v }])),
    kill: async () => undefined,
    watch: (fn) => { events.on("c", fn); return () => events.off("c", fn); },
    logs: async () => undefined,
  };
  /** Ends a running step with `patch` over a clean exit (no outputs). */
  const finish = (runId: string, stepId: string, patch: Partial<ObservedStepState> = {}) => {
    const m = steps.get(runId);
    const o = m?.get(stepId);
    if (!m || !o) throw new Error(`${runId}/${stepId} is not running`);
    m.set(stepId, { ...o, phase: "completed", exitCode: 0, finishedAt: Date.now(), outputs: [], ...patch });
    events.emit("c", runId);
  };
  return { executor, steps, finish };
}
