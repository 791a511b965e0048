// Event streams (docs/events.md): how fast one session's events reach 100 watchers, and what watching
// adds to a run, measured side by side with an unwatched session.
import { createParser } from "eventsource-parser";
import { fmt, percentile, REQUEST_TIMEOUT_MS } from "./load.mjs";

const WATCHERS = 100;
const FANOUT_SENDS = 60;
const RUN_PAIRS = 40;

/**
 * An open SSE stream (Node fetch, parsed by eventsource-parser) that keeps a few facts per event: how many,
 * whether their ids were consecutive, and the last `run` event's runId and status (comments such as `: ping`
 * are skipped).
 */
async function watch(base, token, path) {
  const controller = new AbortController();
  const res = await fetch(base + path, { headers: { Authorization: `Bearer ${token}` }, signal: controller.signal });
  if (res.status !== 200) throw new Error(`${path} → ${res.status}: ${await res.text()}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const w = { events: 0, lastId: null, consecutive: true, lastRun: null, ended: false, waiters: [] };
  w.close = () => controller.abort();
  const parser = createParser({
    onEvent: (e) => {
      w.events++;
      if (e.id !== undefined) {
        // Ids are `<sessionId>:<seq>` (src/events/event-ids.ts); one session's seqs are consecutive.
        const seq = Number(e.id.slice(e.id.lastIndexOf(":") + 1));
        if (w.lastId !== null && seq !== w.lastId + 1) w.consecutive = false;
        w.lastId = seq;
      }
      if (e.event === "run") w.lastRun = JSON.parse(e.data);
    },
  });
  (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.feed(decoder.decode(value, { stream: true }));
        w.waiters = w.waiters.filter((x) => !x());
      }
    } catch {
      /* aborted */
    }
    w.ended = true;
    w.waiters = w.waiters.filter((x) => !x());
  })();
  /** Resolves once `done(w)` holds or the stream ended; rejects after REQUEST_TIMEOUT_MS. */
  w.until = (done) =>
    new Promise((resolve, reject) => {
      const t = setTimeout(
        () => reject(new Error(`watcher of ${path} stalled after ${w.events} events`)),
        REQUEST_TIMEOUT_MS,
      );
      const check = () => {
        if (!done(w) && !w.ended) return false;
        clearTimeout(t);
        resolve(w);
        return true;
      };
      if (!check()) w.waiters.push(check);
    });
  return w;
}

const enc = encodeURIComponent;

async function sendAndWait(request, key, message) {
  const sent = await request("POST", `/v1/sessions/${enc(key)}/messages`, { message });
  await request("GET", `/v1/runs/${sent.json.runId}/wait?timeoutMs=60000`);
  return sent.json.runId;
}

export async function benchEvents({ request, base, token, log }) {
  // 1. Fan-out: 100 watchers of one session; FANOUT_SENDS messages sent at once (the session's queue may
  // fold some into one run, so the event count is not fixed), then one marker run after all of them ended.
  // Events arrive in id order, so a watcher that saw the marker's `ok` has seen everything before it.
  const key = "agent:main:bench-events-fanout";
  await request("PATCH", `/v1/sessions/${enc(key)}`, { label: "fan-out" });
  const watchers = await Promise.all(
    Array.from({ length: WATCHERS }, () => watch(base, token, `/v1/sessions/${enc(key)}/events`)),
  );
  const t0 = performance.now();
  const sent = await Promise.all(
    Array.from({ length: FANOUT_SENDS }, (_, i) =>
      request("POST", `/v1/sessions/${enc(key)}/messages`, { message: `m${i}` }),
    ),
  );
  const runIds = [...new Set(sent.map((r) => r.json.runId))];
  await Promise.all(runIds.map((id) => request("GET", `/v1/runs/${id}/wait?timeoutMs=60000`)));
  const marker = await sendAndWait(request, key, "marker");
  await Promise.all(watchers.map((w) => w.until((x) => x.lastRun?.runId === marker && x.lastRun.status === "ok")));
  const seconds = (performance.now() - t0) / 1000;
  for (const w of watchers) w.close();
  // The stream started live on an empty event log, so the marker's id is the number of events.
  const total = Math.max(...watchers.map((w) => w.lastId ?? 0));
  const complete = watchers.filter((w) => w.events === total && w.consecutive).length;
  log(`  fan-out: ${complete}/${WATCHERS} watchers got all ${total} events, in order, in ${fmt(seconds, 2)} s`);

  // 2. A run with watchers (its session stream and its run stream) vs without, interleaved.
  const plainKey = "agent:main:bench-events-unwatched";
  const watchedKey = "agent:main:bench-events-watched";
  await sendAndWait(request, plainKey, "warm");
  await sendAndWait(request, watchedKey, "warm");
  const sessionWatcher = await watch(base, token, `/v1/sessions/${enc(watchedKey)}/events`);
  const plain = [];
  const watched = [];
  let lastWatched = null;
  for (let i = 0; i < RUN_PAIRS; i++) {
    let t = performance.now();
    await sendAndWait(request, plainKey, `p${i}`);
    plain.push(performance.now() - t);
    t = performance.now();
    const res = await request("POST", `/v1/sessions/${enc(watchedKey)}/messages`, { message: `w${i}` });
    const runWatcher = await watch(base, token, `/v1/runs/${res.json.runId}/events`);
    await runWatcher.until(() => false); // the run stream closes after the run's final status
    watched.push(performance.now() - t);
    lastWatched = res.json.runId;
  }
  await sessionWatcher.until((x) => x.lastRun?.runId === lastWatched && x.lastRun.status === "ok");
  sessionWatcher.close();
  const sorted = (xs) => [...xs].sort((a, b) => a - b);
  const med = (xs) => percentile(sorted(xs), 50);
  const p95 = (xs) => percentile(sorted(xs), 95);
  const lines = [
    "| scenario | figure |",
    "|---|---|",
    `| events delivered to ${WATCHERS} watchers of one session (${FANOUT_SENDS} messages sent at once + 1; ${total} events) | ${fmt((total * complete) / seconds, 0)} deliveries/s (${fmt(total / seconds, 0)} events/s reaching every watcher); ${complete}/${WATCHERS} watchers got every event in order |`,
    `| a run, unwatched (send + wait until it ended), ${RUN_PAIRS} runs | median ${fmt(med(plain))} ms · p95 ${fmt(p95(plain))} ms |`,
    `| a run, watched (session stream open; send + its run stream until the final status), ${RUN_PAIRS} runs | median ${fmt(med(watched))} ms · p95 ${fmt(p95(watched))} ms |`,
    `| added cost of watching (median watched / unwatched) | ${fmt(med(watched) / med(plain), 2)}× |`,
  ];
  return { lines };
}
