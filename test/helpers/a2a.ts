import { exports } from "cloudflare:workers";
import { SendMessageRequest, type StreamResponse } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import { GATEWAY } from "./http";

export const ORIGIN = "https://switchboard.test";

/** The Worker as the official A2A client's `fetch`, with a bearer token on every request. */
export function workerFetch(token: string = GATEWAY): typeof fetch {
  return (input: RequestInfo | URL, init?: RequestInit) => {
    const req = new Request(input, init);
    req.headers.set("Authorization", `Bearer ${token}`);
    return exports.default.fetch(req);
  };
}

/**
 * The official A2A JS SDK's client for one agent, built from its card the way a remote client would: over the
 * JSON-RPC binding, or with `binding: "rest"` over the HTTP+JSON one (the SDK's RestTransport).
 */
export function a2aClient(
  agentId: string,
  token: string = GATEWAY,
  binding: "jsonrpc" | "rest" = "jsonrpc",
): Promise<Client> {
  const fetchImpl = workerFetch(token);
  const factory = new ClientFactory({
    transports: [
      binding === "rest" ? new RestTransportFactory({ fetchImpl }) : new JsonRpcTransportFactory({ fetchImpl }),
    ],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  });
  return factory.createFromUrl(`${ORIGIN}/a2a/${agentId}/`);
}

/** A `SendMessageRequest` of one text part, as its JSON form would arrive. */
export function textMessage(text: string, extra: { contextId?: string; returnImmediately?: boolean } = {}) {
  return SendMessageRequest.fromJSON({
    message: {
      messageId: crypto.randomUUID(),
      role: "ROLE_USER",
      parts: [{ text }],
      ...(extra.contextId ? { contextId: extra.contextId } : {}),
    },
    ...(extra.returnImmediately ? { configuration: { returnImmediately: true } } : {}),
  });
}

/** A stream event as `[kind, what]`, for asserting the order of a stream. */
export function shape(e: StreamResponse): [string, unknown] {
  const p = e.payload!;
  if (p.$case === "task") return ["task", p.value.status?.state];
  if (p.$case === "statusUpdate") return ["status", p.value.status?.state];
  if (p.$case === "artifactUpdate")
    return [
      "artifact",
      {
        text: (p.value.artifact!.parts[0].content as { value: string }).value,
        append: p.value.append,
        last: p.value.lastChunk,
      },
    ];
  return ["message", p.value.messageId];
}
