// Bindings and secrets of the Switchboard Worker (see wrangler.toml and docs/contract.md).
declare namespace Cloudflare {
  interface Env {
    /** The CONFIG document: a JSON object (wrangler.toml [vars]) or a JSON string (`--var CONFIG:<json>`). */
    CONFIG?: unknown;
    /** Operator token: may act as any session. */
    GATEWAY_TOKEN?: string;
    /** JSON `{"<agentId>": "<token>"}`: least-privilege tokens confined to one agent's sessions. */
    AGENT_TOKENS?: string;
    /** HMAC key for run tokens minted for webhook runtimes. */
    SIGNING_SECRET?: string;
    SESSIONS: DurableObjectNamespace<import("./session/session-object").SessionObject>;
    REGISTRY: DurableObjectNamespace<import("./registry/registry-object").RegistryObject>;
    /** Optional Workers AI binding, used by `workers-ai/<model>` models. */
    AI?: Ai;
    /** Workers Rate Limiting binding counting failed authentications per client (src/http/rate-limit.ts). */
    AUTH_FAILURES?: RateLimit;
    /** Optional R2 bucket: archived sub-agent transcripts are exported here before their storage is cleared. */
    ARCHIVE?: R2Bucket;
    [secret: string]: unknown;
  }
}
interface Env extends Cloudflare.Env {}
