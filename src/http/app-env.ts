import type { TimingVariables } from "hono/timing";
import type { Config } from "../config/schema";
import type { Principal } from "./principal";

/**
 * The Hono environment of every route module: bindings, the parsed CONFIG, the caller and the request
 * id. Kept apart from app.ts so route modules never import the module that mounts them (no import cycle).
 */
export type AppEnv = {
  Bindings: Env;
  Variables: { cfg: Config; principal: Principal; requestId: string } & TimingVariables;
};
