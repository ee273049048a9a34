/**
 * The one condition wait of the tests: polls `check` until it returns a truthy value, and resolves with it; past `timeoutMs` it fails naming what it waited for. It waits on a condition, never
 * for a fixed time (time-based behaviour itself is tested with ManualClock).
 */
export async function waitFor<T>(
  check: () => T | undefined | null | false | 0 | '' | Promise<T | undefined | null | false | 0 | ''>,
  timeoutMs = 10_000,
  what: string = check.toString(),
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
