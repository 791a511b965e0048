import { useEffect, useState } from "preact/hooks";
import { ApiError, api } from "./api";
import { ErrorLine } from "./errors";
import { RowsHead } from "./table-parts";
import type { Agent } from "./types";

interface EffectiveConfig {
  config: Record<string, unknown>;
  warnings: string[];
}

/** Agents (GET /v1/agents) and, for the operator, the effective configuration (GET /v1/config). */
export function AgentsPage() {
  const [agents, setAgents] = useState<Agent[]>([]);
  const [config, setConfig] = useState<EffectiveConfig | null>(null);
  const [configError, setConfigError] = useState<unknown>(null);
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    api<{ agents: Agent[] }>("GET", "/v1/agents")
      .then((r) => setAgents(r.agents))
      .catch(setError);
    api<EffectiveConfig>("GET", "/v1/config").then(setConfig).catch(setConfigError);
  }, []);

  return (
    <section aria-labelledby="agents-title">
      <h1 id="agents-title">Agents</h1>
      <ErrorLine error={error} />
      <table class="rows">
        <RowsHead columns={["Agent", "Model", "Runtime", "Sandboxed"]} />
        <tbody>
          {agents.map((a) => (
            <tr key={a.id}>
              <td data-label="Agent">
                {a.name ? `${a.name} (${a.id})` : a.id}
                {a.default ? " · default" : ""}
              </td>
              <td data-label="Model">{a.model}</td>
              <td data-label="Runtime">{a.runtime}</td>
              <td data-label="Sandboxed">{a.sandboxed ? "yes" : "no"}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Configuration warnings</h2>
      {config && config.warnings.length === 0 && <p>None: all of CONFIG is in effect as written.</p>}
      {config && config.warnings.length > 0 && (
        <ul class="warnings" data-testid="config-warnings">
          {config.warnings.map((w) => (
            <li key={w}>{w}</li>
          ))}
        </ul>
      )}
      <h2>Effective configuration</h2>
      {configError instanceof ApiError && configError.status === 403 ? (
        <p>Only the operator token may read the configuration.</p>
      ) : (
        <ErrorLine error={configError} />
      )}
      {config && (
        <pre class="config" data-testid="effective-config">
          {JSON.stringify(config.config, null, 2)}
        </pre>
      )}
    </section>
  );
}
