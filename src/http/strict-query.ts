import type { MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import { invalid } from "../errors";
import type { AppEnv } from "./app-env";

/**
 * Query strings are as closed as bodies and tool arguments (docs/contract.md, "Endpoints"): a parameter the
 * route does not take is a 400 naming it, not ignored — a misspelt `limt=5` would otherwise quietly page by
 * the default. The names a route takes are those of its own `valid("query", …)` schema (src/http/validate.ts),
 * the one that also documents them in /openapi.json; a route is held to this once it is documented
 * (`routeDoc`, src/http/route-doc.ts), so protocol routes outside the document keep their own rules.
 */

const QUERY_NAMES = Symbol("switchboard.queryNames");
const DOCUMENTED = Symbol("switchboard.documented");

type Marked = { [QUERY_NAMES]?: readonly string[]; [DOCUMENTED]?: true };

/** Remember on a `valid("query", schema)` middleware which names its schema takes. */
export function markQueryNames<M extends object>(middleware: M, names: readonly string[]): M {
  return Object.assign(middleware, { [QUERY_NAMES]: names });
}

/** Remember on a `routeDoc(...)` middleware that its route is in the document. */
export function markDocumented<M extends object>(middleware: M): M {
  return Object.assign(middleware, { [DOCUMENTED]: true as const });
}

export const strictQuery: MiddlewareHandler<AppEnv> = async (c, next) => {
  const search = new URL(c.req.url).searchParams;
  if (search.size > 0) {
    // The route that answers: the first method route matched, with every handler chained on it.
    const routes = matchedRoutes(c).filter((r) => r.method !== "ALL");
    const own = routes.filter((r) => r.path === routes[0]?.path && r.method === routes[0]?.method);
    const handlers = own.map((r) => r.handler as unknown as Marked);
    if (handlers.some((h) => h[DOCUMENTED])) {
      const takes = handlers.flatMap((h) => h[QUERY_NAMES] ?? []);
      const unknown = [...new Set(search.keys())].filter((name) => !takes.includes(name));
      if (unknown.length > 0)
        throw invalid(
          `${unknown.map((n) => (n.length > 64 ? `${n.slice(0, 61)}...` : n)).join(", ")}: unknown query parameter${unknown.length > 1 ? "s" : ""} (${takes.length ? `this route takes ${takes.join(", ")}` : "this route takes none"})`,
        );
    }
  }
  await next();
};
