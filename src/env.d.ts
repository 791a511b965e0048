// What `wrangler types` cannot know from wrangler.jsonc (everything else of `Env` is generated into
// worker-configuration.d.ts by `npm run types`).
// The Workers AI binding is optional: it is remote-only, so the default wrangler.jsonc leaves it out to keep
// `npm start` and the tests offline; add `"ai": { "binding": "AI" }` to use `workers-ai/<model>` (docs/models.md).
// SIGNING_SECRET_PREVIOUS is set only while SIGNING_SECRET is being rotated: run tokens signed with it still
// verify (src/runners/run-token.ts, docs/contract.md "Authentication and scopes").
interface Env {
  AI?: Ai;
  SIGNING_SECRET_PREVIOUS?: string;
}
declare namespace Cloudflare {
  interface Env {
    AI?: Ai;
    SIGNING_SECRET_PREVIOUS?: string;
  }
}
