// Where the dashboard finds its gateway. In a browser it is the page's own
// origin and the session cookie; in the desktop window the shell hands over
// the gateway's address and an admin session through one command.

import type { ApiOptions } from './api';

interface TauriInternals {
  invoke<T>(command: string, args?: Record<string, unknown>): Promise<T>;
}

export async function connection(): Promise<ApiOptions> {
  const tauri = (window as unknown as { __TAURI_INTERNALS__?: TauriInternals }).__TAURI_INTERNALS__;
  if (tauri) {
    const c = await tauri.invoke<{ base: string; token: string }>('connect');
    return { base: c.base, token: c.token };
  }
  return {};
}
