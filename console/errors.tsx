import { ApiError } from "./api";

export function errorText(err: unknown): string {
  return err instanceof ApiError ? `${err.status} ${err.type}: ${err.message}` : String(err);
}

export function ErrorLine(props: { error: unknown }) {
  if (!props.error) return null;
  return (
    <p role="alert" class="error">
      {errorText(props.error)}
    </p>
  );
}
