// Hash routes keep the console one static page: #/sessions, #/session/<key>/<tab>, #/agents.
import { useEffect, useState } from "preact/hooks";

export type Route = { page: "sessions" } | { page: "session"; key: string; tab: SessionTab } | { page: "agents" };

export const SESSION_TABS = [
  "transcript",
  "runs",
  "subagents",
  "exchanges",
  "deliveries",
  "settings",
  "status",
] as const;
export type SessionTab = (typeof SESSION_TABS)[number];

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/");
  if (parts[0] === "agents") return { page: "agents" };
  if (parts[0] === "session" && parts[1]) {
    const tab = SESSION_TABS.find((t) => t === parts[2]) ?? "transcript";
    return { page: "session", key: decodeURIComponent(parts[1]), tab };
  }
  return { page: "sessions" };
}

export const sessionHref = (key: string, tab: SessionTab = "transcript") =>
  `#/session/${encodeURIComponent(key)}/${tab}`;

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(location.hash));
    window.addEventListener("hashchange", onChange);
    return () => window.removeEventListener("hashchange", onChange);
  }, []);
  return route;
}
