// What `wrangler types` cannot know from wrangler.jsonc (everything else of `Env` is generated into
// worker-configuration.d.ts by `npm run types`).
// The Workers AI binding is optional: it is remote-only, so the default wrangler.jsonc leaves it out to keep
// `npm start` and the tests offline; add `"ai": { "binding": "AI" }` to use `workers-ai/<model>` (docs/models.md).
interface Env {
  AI?: Ai;
}
declare namespace Cloudflare {
  interface Env {
    AI?: Ai;
  }
}
