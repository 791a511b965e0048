import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Validator } from "@cfworker/json-schema";
import { expect } from "vitest";
import worker from "../../src/index";
import { GATEWAY } from "./http";

/**
 * Checks real responses against /openapi.json: the status must be documented for the operation, and a
 * JSON body must validate against the documented schema (compiled with @cfworker/json-schema, which
 * runs in workerd). Every checked (operation, status) is recorded, so a test can ask which documented
 * answers it never saw.
 */

export type Doc = {
  paths: Record<string, Record<string, { responses: Record<string, any> }>>;
  components: { schemas: Record<string, unknown> };
};

export interface Answer {
  status: number;
  json: any;
  headers: Headers;
  text: string;
}

export interface RequestOpts {
  token?: string | null;
  headers?: Record<string, string>;
  /** A raw body (sent as is, with Content-Type: application/json). */
  raw?: string;
  /** Environment overrides for this one request (e.g. an invalid CONFIG). */
  env?: Record<string, unknown>;
}

/** One request to the Worker's fetch handler (not SELF: its cost grows with every request it served). */
export async function request(method: string, path: string, body?: unknown, opts: RequestOpts = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  const token = opts.token === undefined ? GATEWAY : opts.token;
  if (token) headers.Authorization = `Bearer ${token}`;
  const payload = opts.raw ?? (body === undefined ? undefined : JSON.stringify(body));
  if (payload !== undefined) headers["Content-Type"] ??= "application/json";
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request(`https://switchboard.test${path}`, { method, headers, body: payload }),
    { ...env, ...(opts.env ?? {}) } as Env,
    ctx,
  );
  // An event stream may never end (a live session stream): its status and headers are the contract.
  const streaming = (res.headers.get("Content-Type") ?? "").startsWith("text/event-stream");
  const text = streaming ? "" : await res.text();
  if (streaming) await res.body?.cancel();
  await waitOnExecutionContext(ctx);
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, headers: res.headers, text };
}

export class Contract {
  readonly seen = new Set<string>();
  private readonly validators = new Map<string, Validator>();

  constructor(readonly doc: Doc) {}

  /** Assert `answer` is a documented answer of `METHOD /path/{template}` and its body matches the schema. */
  check(op: string, answer: Answer): Answer {
    const [method, path] = op.split(" ");
    const operation = this.doc.paths[path]?.[method.toLowerCase()];
    expect(operation, `${op} is documented`).toBeDefined();
    const documented = operation.responses[String(answer.status)];
    expect(
      documented,
      `${op} answered ${answer.status} (${answer.text.slice(0, 200)}), which is not documented`,
    ).toBeDefined();
    // Of several documented media types, the one the answer has (else the first, which the checks below then refuse).
    const medias = documented.content ? Object.keys(documented.content) : [];
    const sent = answer.headers.get("Content-Type") ?? "";
    const media = medias.find((m) => sent.startsWith(m)) ?? medias[0];
    if (media === "application/json") {
      expect(answer.headers.get("Content-Type") ?? "", `${op} ${answer.status} content type`).toMatch(
        /^application\/json/,
      );
      const result = this.validator(`${op} ${answer.status}`, documented.content[media].schema).validate(answer.json);
      const errors = result.errors.map((e) => `${e.instanceLocation}: ${e.error}`);
      expect(errors, `${op} ${answer.status} body ${answer.text.slice(0, 300)}`).toEqual([]);
    } else if (media) {
      expect(answer.headers.get("Content-Type") ?? "", `${op} ${answer.status} content type`).toContain(
        media === "application/octet-stream" ? "" : media,
      );
    } else {
      expect(answer.text, `${op} ${answer.status} has no documented body`).toBe("");
    }
    this.seen.add(`${op} ${answer.status}`);
    return answer;
  }

  /** Every documented (operation, status) pair. */
  documented(): string[] {
    return Object.entries(this.doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops).flatMap(([method, op]) =>
        Object.keys(op.responses).map((s) => `${method.toUpperCase()} ${path} ${s}`),
      ),
    );
  }

  operations(): string[] {
    return Object.entries(this.doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
  }

  private validator(key: string, schema: unknown): Validator {
    let v = this.validators.get(key);
    if (!v) {
      // The response schema is the root, with the document's components beside it so `#/components/...` resolves.
      v = new Validator({ ...(schema as object), components: this.doc.components } as never, "2020-12", false);
      this.validators.set(key, v);
    }
    return v;
  }
}

/**
 * The task ledger's operations: test/http/openapi-contract-tasks.test.ts produces their answers (but 401, 429
 * and 500, which test/http/openapi-contract.test.ts produces for every route).
 */
export const TASK_OPERATIONS = [
  "GET /v1/sessions/{key}/tasks",
  "GET /v1/sessions/{key}/tasks/audit",
  "GET /v1/tasks/{taskId}",
  "POST /v1/tasks/{taskId}/cancel",
];

/**
/**
 * The A2A HTTP+JSON binding's operations: test/http/openapi-contract-a2a.test.ts produces their answers (but 401,
 * 413, 429 and 500, which test/http/openapi-contract.test.ts produces for every route).
 */
export const A2A_REST_OPERATIONS = [
  "POST /a2a/{agentId}/message:send",
  "POST /a2a/{agentId}/message:stream",
  "GET /a2a/{agentId}/tasks/{taskRef}",
  "POST /a2a/{agentId}/tasks/{taskRef}",
  "POST /a2a/{agentId}/tasks/{taskId}/pushNotificationConfigs",
  "GET /a2a/{agentId}/tasks/{taskId}/pushNotificationConfigs",
  "GET /a2a/{agentId}/tasks/{taskId}/pushNotificationConfigs/{configId}",
  "DELETE /a2a/{agentId}/tasks/{taskId}/pushNotificationConfigs/{configId}",
];

/**
 * Documented answers test/http/openapi-requests.test.ts produces (and asserts it did): refusals of a
 * documented constraint that no hand-written request of test/http/openapi-contract.test.ts sends.
 */
export const GENERATED_ANSWERS = ["GET /a2a/{agentId}/.well-known/agent-card.json 400"];

/** A documented answer (`METHOD /path status`) another contract file produces. */
export const ownedElsewhere = (answer: string) =>
  GENERATED_ANSWERS.includes(answer) ||
  (TASK_OPERATIONS.some((op) => answer.startsWith(`${op} `)) && !/ (401|429|500)$/.test(answer)) ||
  (A2A_REST_OPERATIONS.some((op) => answer.startsWith(`${op} `)) && !/ (401|413|429|500)$/.test(answer));
