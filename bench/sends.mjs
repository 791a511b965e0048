// The sends part of the benchmark: 1,000 concurrent fire-and-forget sends into one session (then prove
// all ran, in acceptance order, none lost, none twice) and 1,000 sends spread over 1,000 sessions,
// each next to a burst of bare object calls of the same shape, so the per-send overhead is visible. The calls
// themselves: bench/send-calls.mjs; where a send's time goes: bench/send-profile.mjs.
import { measureInterleaved, runPool } from "./load.mjs";
import { answersSince, burst, pinger, SEND_TEXT, sender, sendRaw, WAIT_DEADLINE_MS, waitAll } from "./send-calls.mjs";
import { profilePhases } from "./send-profile.mjs";

const SEND_TEXT_RE = /^bench-send #(\d{4})$/;

/** `sessions_send` (timeoutSeconds: 0) when the tool is registered, else the REST inbound route (same queue). */
export async function detectSendPath(request, requesterKey) {
  try {
    await request("POST", "/tools/invoke", {
      tool: "sessions_send",
      sessionKey: requesterKey,
      dryRun: true,
      args: { sessionKey: "agent:send:probe", message: "probe", timeoutSeconds: 0 },
    });
    return "sessions_send";
  } catch (err) {
    if (err.status === 404) return "rest";
    throw err;
  }
}

/** Poll a session's queue until no run is queued or running (bounded); returns the runs in queue order. */
async function drainQueue(request, key) {
  const deadline = Date.now() + WAIT_DEADLINE_MS;
  for (;;) {
    const runs = (await request("GET", `/v1/_bench/run-order/${encodeURIComponent(key)}`)).json.runs;
    if (!runs.some((r) => r.status === "queued" || r.status === "running")) return runs;
    if (Date.now() > deadline) throw new Error(`queue of ${key} did not drain within ${WAIT_DEADLINE_MS / 1000}s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

function textOf(message) {
  if (typeof message.content === "string") return message.content;
  return (message.content ?? [])
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .join("");
}

async function readTranscript(base, token, key) {
  const res = await fetch(`${base}/v1/sessions/${encodeURIComponent(key)}/transcript.jsonl`, {
    headers: { Authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(60_000),
  });
  if (!res.ok) throw new Error(`transcript of ${key}: ${res.status}`);
  const bySeq = new Map();
  for (const line of (await res.text()).split("\n")) {
    if (!line.trim()) continue;
    const entry = JSON.parse(line);
    if (entry.type === "message") bySeq.set(entry.seq, entry.message);
  }
  return bySeq;
}

/**
 * The fan-in check. "In order" means the order the gateway accepted the sends (the queue's qseq,
 * assigned in the enqueue transaction); sends are concurrent, so no other order exists. Checked:
 * every send accepted once and ended ok; queue order == transcript order; each numbered message
 * appears exactly once, followed by its reply; and no send answered before another was even sent
 * was queued after it (real-time order, from the client's clock).
 */
function checkFanIn({ runIds, texts, sentAt, answeredAt, runOrder, bySeq }) {
  const problems = [];
  const textOfRun = new Map(runIds.map((id, i) => [id, texts[i]]));
  if (new Set(runIds).size !== runIds.length)
    problems.push("the gateway returned the same runId for two different sends");
  const ours = runOrder.filter((r) => textOfRun.has(r.runId));
  if (ours.length !== runIds.length) problems.push(`queue holds ${ours.length} of ${runIds.length} accepted runs`);
  const notOk = ours.filter((r) => r.status !== "ok");
  if (notOk.length) problems.push(`${notOk.length} runs did not end ok (first: ${notOk[0].runId} ${notOk[0].status})`);

  let lastSeq = 0;
  let outOfOrder = 0;
  let missingReply = 0;
  let wrongText = 0;
  for (const r of ours) {
    if (r.userSeq === null || r.userSeq <= lastSeq) outOfOrder++;
    lastSeq = r.userSeq ?? lastSeq;
    const user = bySeq.get(r.userSeq);
    if (user?.role !== "user" || textOf(user) !== textOfRun.get(r.runId)) wrongText++;
    const reply = bySeq.get((r.userSeq ?? 0) + 1);
    if (reply?.role !== "assistant" || reply.stopReason !== "stop" || !textOf(reply).includes(textOfRun.get(r.runId)))
      missingReply++;
  }
  if (outOfOrder) problems.push(`${outOfOrder} runs out of queue order in the transcript`);
  if (wrongText) problems.push(`${wrongText} runs whose transcript message is not the text sent`);
  if (missingReply) problems.push(`${missingReply} messages not followed by their reply`);

  const seen = new Map();
  for (const m of bySeq.values()) {
    if (m.role !== "user") continue;
    const hit = SEND_TEXT_RE.exec(textOf(m));
    if (hit) seen.set(hit[1], (seen.get(hit[1]) ?? 0) + 1);
  }
  const lost = texts.filter((t) => !seen.has(SEND_TEXT_RE.exec(t)[1])).length;
  const twice = [...seen.values()].filter((n) => n > 1).length;
  if (lost) problems.push(`${lost} sends lost`);
  if (twice) problems.push(`${twice} sends in the transcript more than once`);

  // Real-time order: if send A was answered before send B was sent, A must be ahead of B in the queue.
  const qseqOf = new Map(ours.map((r) => [r.runId, r.qseq]));
  const byAnswer = runIds
    .map((id, i) => ({ q: qseqOf.get(id) ?? Infinity, at: answeredAt[i] }))
    .sort((a, b) => a.at - b.at);
  const prefixMaxQ = [];
  for (const a of byAnswer) prefixMaxQ.push(Math.max(prefixMaxQ.at(-1) ?? -Infinity, a.q));
  let constrained = 0;
  let rtViolations = 0;
  runIds.forEach((id, i) => {
    let lo = 0;
    let hi = byAnswer.length; // count of sends answered strictly before this one was sent
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (byAnswer[mid].at < sentAt[i]) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0) {
      constrained += lo;
      if (prefixMaxQ[lo - 1] >= (qseqOf.get(id) ?? -Infinity)) rtViolations++;
    }
  });
  if (rtViolations)
    problems.push(`${rtViolations} sends queued ahead of a send that was answered before they were sent`);
  return {
    ok: problems.length === 0,
    problems,
    checked: ours.length,
    distinct: seen.size,
    lost,
    twice,
    outOfOrder,
    constrained,
  };
}

/** Run the send bursts and checks; returns rows for the report and the fan-in check. */
export async function benchSends({
  request,
  base,
  token,
  count = 1_000,
  requesterKey = "agent:send:main",
  log = () => {},
  slow = null,
}) {
  const path = await detectSendPath(request, requesterKey);
  log(`  send path: ${path}`);
  const retries = { count: 0 };
  const send = sender(request, path, requesterKey, retries);
  const pingRetries = { count: 0 };
  const ping = pinger(request, pingRetries);
  const texts = Array.from({ length: count }, (_, i) => SEND_TEXT(i + 1));

  // Warm the worker and both code paths (a different session, so the checks below see only the bursts).
  await runPool(50, 8, (_i) => ping("agent:send:warm"));
  await runPool(50, 8, (i) => send("agent:send:warm", `warm-up ${i}`));

  // --- one session: bare burst, then the send burst, then wait until every run has ended
  const fanInKey = "agent:send:fanin";
  const bareOne = await burst(`bare ×${count} → one object`, count, () => ping(fanInKey));
  const bareOneRetries = pingRetries.count;
  const fanIn = await burst(`send ×${count} → one session`, count, (i) => send(fanInKey, texts[i]));
  log(`  ${fanIn.stats.name}: answered in ${(fanIn.stats.wall / 1000).toFixed(1)} s`);
  const fanInIds = fanIn.results;
  const fanInRetries = retries.count;
  const fanInRuns = await waitAll(request, fanInIds, 4);
  const fanInDoneMs = performance.now() - fanIn.t0;
  // Follow-up runs (the announce step of each send) queue behind the sends; let them finish so the
  // next burst is not measured against a busy session and the transcript below is final.
  const runOrder = await drainQueue(request, fanInKey);
  const fanInDrainedMs = performance.now() - fanIn.t0;
  log(
    `  fan-in runs ended after ${(fanInDoneMs / 1000).toFixed(1)} s, queue idle after ${(fanInDrainedMs / 1000).toFixed(1)} s`,
  );
  const bySeq = await readTranscript(base, token, fanInKey);
  const check = checkFanIn({
    runIds: fanInIds,
    texts,
    sentAt: fanIn.sentAt,
    answeredAt: fanIn.answeredAt,
    runOrder,
    bySeq,
  });

  // --- 1,000 sessions: bare burst over 1,000 fresh objects, then one send into each of 1,000 sessions
  const bareSpread = await burst(`bare ×${count} → ${count} objects`, count, (i) => ping(`agent:send:bare-${i}`));
  const bareSpreadRetries = pingRetries.count - bareOneRetries;
  log(`  ${bareSpread.stats.name}: answered in ${(bareSpread.stats.wall / 1000).toFixed(1)} s`);
  const spread = await burst(`send ×${count} → ${count} sessions`, count, (i) =>
    send(`agent:send:spread-${i}`, texts[i]),
  );
  log(`  ${spread.stats.name}: answered in ${(spread.stats.wall / 1000).toFixed(1)} s`);
  const spreadRetries = retries.count - fanInRetries;
  const spreadRuns = await waitAll(request, spread.results, 16);
  const spreadDoneMs = performance.now() - spread.t0;
  const spreadBad = spreadRuns.filter((r, i) => r.status !== "ok" || !String(r.reply ?? "").includes(texts[i])).length;

  // --- steady state: what one send costs its caller next to a bare object call, at the read
  // benchmark's concurrency (8), interleaved; the runs it starts execute in the background meanwhile.
  const label = path === "sessions_send" ? "sessions_send" : "POST …/messages";
  // A send into a new session is compared with a bare call of the same shape: one into a fresh object
  // each (the object is started for the call), as the 1,000-session burst does (docs/scale.md).
  let steadyOne = 0;
  let steadyNew = 0;
  let bareNew = 0;
  const steady = await measureInterleaved(
    [
      { name: "bare route", call: () => ping("agent:send:steady") },
      { name: `${label} → one session`, call: () => send("agent:send:steady", `steady #${steadyOne++}`) },
      {
        name: `${label} → a new session each`,
        call: () => send(`agent:send:steady-${steadyNew}`, `steady #${steadyNew++}`),
      },
      { name: "bare route → a new object each", call: () => ping(`agent:send:bare-steady-${bareNew++}`) },
    ],
    { warmup: 40, requests: 400, rounds: 10, concurrency: 8 },
  );
  log(`  steady state measured`);
  const profile = await profilePhases(request, requesterKey, ping);
  log(`  send phases profiled`);
  // Last, so the slow model's late answers (and their announce steps) disturb no other measurement.
  const slowModel = slow ? await slowModelSends(request, ping, slow, count, log) : null;

  const rows = [
    { ...bareOne.stats, retried: bareOneRetries },
    {
      ...fanIn.stats,
      retried: fanInRetries,
      drainedMs: fanInDrainedMs,
      followUps: runOrder.length - count,
      allRanMs: fanInDoneMs,
      runsPerSec: count / (fanInDoneMs / 1000),
      ended: fanInRuns.filter((r) => r.status === "ok").length,
    },
    { ...bareSpread.stats, retried: bareSpreadRetries },
    {
      ...spread.stats,
      retried: spreadRetries,
      allRanMs: spreadDoneMs,
      runsPerSec: count / (spreadDoneMs / 1000),
      ended: spreadRuns.length - spreadBad,
    },
  ];
  const overhead = {
    oneSession: {
      meanMs: fanIn.stats.mean - bareOne.stats.mean,
      perSendMs: (fanIn.stats.wall - bareOne.stats.wall) / count,
    },
    spread: {
      meanMs: spread.stats.mean - bareSpread.stats.mean,
      perSendMs: (spread.stats.wall - bareSpread.stats.wall) / count,
    },
  };
  return { path, count, rows, check, spreadBad, overhead, steady, profile, slowModel };
}

/**
 * Concurrency 8 into new sessions and the 1,000-session burst again, into an agent whose model is a remote
 * provider answering after `delayMs` (bench/slow-provider.mjs), each next to bare calls into new objects. The
 * runs the sends start wait on the network instead of finishing on the machine during the burst; then every
 * run is checked to end ok with its reply, and the announce steps are let finish before returning.
 */
async function slowModelSends(request, ping, { agentId, provider, delayMs }, count, log) {
  const requesterKey = `agent:${agentId}:main`;
  const retries = { count: 0 };
  const send = sender(request, "sessions_send", requesterKey, retries);
  const texts = Array.from({ length: count }, (_, i) => SEND_TEXT(i + 1));

  // Concurrency 8 first, as the steady-state rows above, new sessions next to bare calls into new objects; then
  // its runs' answers (and their announce steps) are let arrive before the burst, so they do not land in it.
  const steadyBefore = provider.stats.requests;
  let n = 0;
  let b = 0;
  const steady = await measureInterleaved(
    [
      {
        name: `sessions_send → a new session each, model answering after ${delayMs / 1000} s`,
        call: () => sendRaw(request, requesterKey, `agent:${agentId}:steady-${n}`, `steady #${n++}`),
      },
      { name: "bare route → a new object each", call: () => ping(`agent:${agentId}:bare-steady-${b++}`) },
    ],
    SLOW_STEADY,
  );
  const steadyAnsweredDuring = provider.stats.requests - steadyBefore;
  await answersSince(provider, steadyBefore, 2 * n);
  log(`  concurrency 8 with the slow model measured`);

  const bare = await burst(`bare ×${count} → ${count} objects`, count, (i) => ping(`agent:${agentId}:bare-${i}`));
  const answeredBefore = provider.stats.requests;
  const sends = await burst(
    `send ×${count} → ${count} sessions, model answering after ${delayMs / 1000} s`,
    count,
    (i) => send(`agent:${agentId}:spread-${i}`, texts[i]),
  );
  const answeredDuring = provider.stats.requests - answeredBefore;
  log(`  ${sends.stats.name}: answered in ${(sends.stats.wall / 1000).toFixed(1)} s`);
  const runs = await waitAll(request, sends.results, 16);
  const bad = runs.filter((r, i) => r.status !== "ok" || !String(r.reply ?? "").includes(texts[i])).length;
  // Each send's announce step asks the model once more; wait for those answers too.
  await answersSince(provider, answeredBefore, 2 * count);
  return {
    bare: bare.stats,
    sends: { ...sends.stats, retried: retries.count },
    ratio: sends.stats.rps / bare.stats.rps,
    answeredDuring,
    bad,
    delayMs,
    steady: { send: steady[0], bare: steady[1], answeredDuring: steadyAnsweredDuring },
  };
}

/** The concurrency-8 rows with the slow model: fewer calls than the echo rows, so its runs' answers come after them. */
const SLOW_STEADY = { warmup: 20, requests: 200, rounds: 5, concurrency: 8 };
