/**
 * The parts every list table of the console shares: a header whose last column is an unlabelled
 * "Actions" cell (named for screen readers), and a status badge styled by its value (console.css).
 */
export function RowsHead(props: { columns: string[]; actions?: boolean }) {
  return (
    <thead>
      <tr>
        {props.columns.map((c) => (
          <th key={c} scope="col">
            {c}
          </th>
        ))}
        {props.actions && (
          <th scope="col">
            <span class="sr-only">Actions</span>
          </th>
        )}
      </tr>
    </thead>
  );
}

export function StatusBadge(props: { status: string }) {
  return <span class={`status status-${props.status}`}>{props.status}</span>;
}
