/** A non-2xx answer: the gateway's error envelope `{ok: false, error: {type, message}}`. */
export class SwitchboardApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
    this.name = "SwitchboardApiError";
  }
}

/** The error of a non-2xx response, from its envelope when it has one. */
export async function apiErrorOf(res: Response): Promise<SwitchboardApiError> {
  let err: { type?: string; message?: string } | undefined;
  try {
    err = ((await res.json()) as { error?: { type?: string; message?: string } }).error;
  } catch {
    err = undefined;
  }
  return new SwitchboardApiError(res.status, err?.type ?? "http_error", err?.message ?? `HTTP ${res.status}`);
}
