// One read the page keeps current: done again when its inputs change (and every `everyMs` while that is
// set); an answer that arrives after the page moved on is dropped, so a slow old answer never wins.
import { useEffect, useState } from "preact/hooks";

export function useRead<T>(
  read: (() => Promise<T>) | null,
  inputs: readonly unknown[],
  everyMs?: number,
): { value: T | null; error: unknown } {
  const [value, setValue] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    if (!read) return;
    let stop = false;
    const once = () =>
      read().then(
        (v) => {
          if (stop) return;
          setValue(v);
          setError(null);
        },
        (e) => {
          if (!stop) setError(e);
        },
      );
    once();
    const timer = everyMs ? setInterval(once, everyMs) : undefined;
    return () => {
      stop = true;
      if (timer) clearInterval(timer);
    };
    // `read` is a new function each render; `inputs` are what it reads, so they decide when to read again.
  }, [...inputs, everyMs]);
  return { value, error };
}
