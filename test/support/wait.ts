/**
 * Waiting in tests that drive real servers: poll until a condition holds (or fail naming
 * what was awaited), and sleep. One copy for every test that waits.
 */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Polls `fn` until it returns something other than undefined/false, and returns that. `what`
 * names what is awaited in the timeout's error; as a function it is asked at the timeout, to
 * say what was seen instead.
 */
export async function until<T>(what: string | (() => string | Promise<string>), fn: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 30_000, pollMs = 50): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${typeof what === "string" ? what : await what()}`);
    await sleep(pollMs);
  }
}
