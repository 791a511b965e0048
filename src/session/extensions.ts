import { SwitchboardError, toRpcError } from "../errors";
import { log } from "../log";
import type { SessionHost } from "./host";
import type { FinishedFlowStates } from "./retention";
import type { RunEndedEvent, RunnerResult, RunRow } from "./run-types";
import type { TimerRow } from "./timers";
import type { EnqueueRequest, RunInput, RunSnapshot } from "./types";

/**
 * Later layers (runners, agent-to-agent flows, the outbox, sub-agent lifecycle) plug into the session
 * object here instead of growing one class: each hook runs at a fixed point of the run/timer lifecycle
 * with the object's narrow host surface (src/session/host.ts). An extension registers itself when its
 * module is imported (src/index.ts lists them).
 */
export interface SessionExtension {
  name: string;
  /** Inside the run-ending transaction: write follow-up rows (timers, outbox, flow state). Must be synchronous. */
  onRunEnded?(host: SessionHost, event: RunEndedEvent): void;
  /** After that transaction committed: start work that may do I/O (a delivery attempt, an RPC). */
  afterRunEnded?(host: SessionHost, event: RunEndedEvent): void | Promise<void>;
  /** A due timer of a kind this extension owns; return true when handled. */
  onTimer?(host: SessionHost, timer: TimerRow): Promise<boolean> | boolean;
  /**
   * Produce the reply of a run (the model runner, webhook agents, owner commands); undefined = not mine.
   * Runners claim disjoint runs, so their registration order does not matter.
   */
  produceReply?(
    host: SessionHost,
    run: RunRow,
    input: RunInput,
    signal: AbortSignal,
  ): Promise<RunnerResult> | undefined;
  /**
   * An inbound message this object may not run itself (a thread bound to a sub-agent): a promise of the
   * run it became elsewhere (null: run it here), or null synchronously when the hook has nothing to check.
   */
  forwardInbound?(host: SessionHost, req: EnqueueRequest): Promise<RunSnapshot | null> | null;
  /** A queued run that may not start yet (a sub-agent task waiting for its lane slot); its holder kicks the queue later. */
  holdsQueuedRun?(host: SessionHost, run: RunRow): boolean;
  /** Called before the session's storage is deleted (archive/delete): release what lives elsewhere. */
  beforeDelete?(host: SessionHost): Promise<void> | void;
  /**
   * True when the run is executed outside this object (a webhook runtime accepted it and completes it
   * through the API later): no in-memory executor is expected, so an expired lease is not a lost run.
   * The run's deadline timer still ends it if nobody answers.
   */
  holdsRun?(host: SessionHost, runId: string): boolean;
  /** The flow kinds this extension writes and their finished states: pruned after the retention period (retention.ts). */
  finishedFlows?: FinishedFlowStates;
  /** Methods other objects and routes call through `callExtension` (flow callbacks, delivery listing). */
  // biome-ignore lint/suspicious/noExplicitAny: each extension narrows its own argument type; ExtensionRpc re-types every call
  rpc?: Record<string, (host: SessionHost, arg: any) => unknown>;
}

/**
 * The RPC tables of the extensions, by extension name. Each extension module adds its entry by
 * declaration merging (`declare module "…/session/extensions" { interface ExtensionRpc { … } }`),
 * so every `callExtension` is checked against the method's real argument and result types while this
 * module still imports none of them.
 */
// biome-ignore lint/suspicious/noEmptyInterface: an empty table that extension modules fill by declaration merging
export interface ExtensionRpc {}

type RpcMethod<N extends keyof ExtensionRpc, M extends keyof ExtensionRpc[N]> = ExtensionRpc[N][M] extends (
  ...args: never[]
) => unknown
  ? ExtensionRpc[N][M]
  : never;
/** The call's argument list: the method's second parameter, or nothing for a method that takes only its host. */
type RpcArgs<F extends (...args: never[]) => unknown> = Parameters<F> extends [unknown, infer A] ? [arg: A] : [];

/** What `callExtension` needs of a session object's stub (the object's `extensionCall` RPC method). */
export interface ExtensionCallTarget {
  extensionCall(name: string, method: string, arg?: unknown): Promise<unknown>;
}

/** Call an extension's method in the object behind `stub`, typed by that extension's RPC table. */
export async function callExtension<N extends keyof ExtensionRpc, M extends keyof ExtensionRpc[N] & string>(
  stub: ExtensionCallTarget,
  name: N,
  method: M,
  ...arg: RpcArgs<RpcMethod<N, M>>
): Promise<Awaited<ReturnType<RpcMethod<N, M>>>> {
  // The one place the untyped wire call is narrowed: the table above is what the object dispatches to.
  return (await stub.extensionCall(name, method, arg[0])) as Awaited<ReturnType<RpcMethod<N, M>>>;
}

const EXTENSIONS: SessionExtension[] = [];

export function registerSessionExtension(ext: SessionExtension): void {
  const at = EXTENSIONS.findIndex((e) => e.name === ext.name);
  if (at >= 0) EXTENSIONS[at] = ext;
  else EXTENSIONS.push(ext);
}

/** The object's side of `callExtension`: run the named extension's RPC method with this host. */
export async function dispatchExtensionCall(
  host: SessionHost,
  name: string,
  method: string,
  arg?: unknown,
): Promise<unknown> {
  const fn = EXTENSIONS.find((e) => e.name === name)?.rpc?.[method];
  if (!fn) throw toRpcError(new SwitchboardError("not_found", `Unknown extension call: ${name}.${method}`));
  return await fn(host, arg);
}

/** The first forwarding hook that moved the message elsewhere, or null: run it here. */
export async function forwardInbound(host: SessionHost, req: EnqueueRequest): Promise<RunSnapshot | null> {
  for (const ext of EXTENSIONS) {
    const check = ext.forwardInbound?.(host, req);
    // Awaited only when a hook had something to look up: ordinary messages never yield here.
    const forwarded = check ? await check : null;
    if (forwarded) return forwarded;
  }
  return null;
}

export function queuedRunIsHeld(host: SessionHost, run: RunRow): boolean {
  return EXTENSIONS.some((e) => e.holdsQueuedRun?.(host, run));
}

export function runIsHeldElsewhere(host: SessionHost, runId: string): boolean {
  return EXTENSIONS.some((e) => e.holdsRun?.(host, runId));
}

/** The reply of a run from the runner that claims it; a run nobody claims is an error, never a silent success. */
export function produceReply(
  host: SessionHost,
  run: RunRow,
  input: RunInput,
  signal: AbortSignal,
): Promise<RunnerResult> {
  for (const ext of EXTENSIONS) {
    const r = ext.produceReply?.(host, run, input, signal);
    if (r) return r;
  }
  return Promise.reject(new Error(`No runner answers ${input.kind} runs of agent ${host.meta?.agentId}`));
}

/** Follow-ups written in the run-ending transaction (flows, deliveries). */
export function onRunEnded(host: SessionHost, event: RunEndedEvent): void {
  for (const ext of EXTENSIONS) ext.onRunEnded?.(host, event);
}

/** Work started after the run-ending transaction committed (e.g. attempt a delivery now); failures are logged. */
export function afterRunEnded(host: SessionHost, event: RunEndedEvent): void {
  for (const ext of EXTENSIONS) {
    if (!ext.afterRunEnded) continue;
    void Promise.resolve(ext.afterRunEnded(host, event)).catch((err) =>
      log.error("after_run_ended_failed", {
        sessionKey: host.key,
        runId: event.run.runId,
        extension: ext.name,
        error: err,
      }),
    );
  }
}

/** A due timer of an extension's kind; false when no extension owns the kind. */
export async function onExtensionTimer(host: SessionHost, timer: TimerRow): Promise<boolean> {
  for (const ext of EXTENSIONS) if (ext.onTimer && (await ext.onTimer(host, timer))) return true;
  return false;
}

export async function beforeDelete(host: SessionHost): Promise<void> {
  for (const ext of EXTENSIONS) await ext.beforeDelete?.(host);
}

export function finishedFlowStates(): FinishedFlowStates {
  return Object.assign({}, ...EXTENSIONS.map((e) => e.finishedFlows ?? {}));
}
