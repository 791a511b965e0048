/**
 * Where a webhook runtime may be (docs/limits.md, "Outbound calls"): every run POST carries a run token, so it
 * goes over https only — plain http is accepted for a loopback host, which only a local development setup
 * reaches (`wrangler dev` with the runtime on the same machine).
 */
export const RUNTIME_URL_RULE =
  "expected an https:// URL (http:// only for a loopback host in local development): run tokens must not travel in clear";

export function isAllowedRuntimeUrl(raw: string): boolean {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return false;
  }
  if (url.protocol === "https:") return true;
  return url.protocol === "http:" && isLoopback(url.hostname);
}

function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return host === "localhost" || host.endsWith(".localhost") || /^127(\.\d{1,3}){3}$/.test(host) || host === "::1";
}
