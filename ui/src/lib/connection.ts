// Where the dashboard finds its gateway. In a browser it is the page's own
// origin and the session cookie; in the desktop window the shell hands over
// the gateway's address and a dashboard session (never the admin token)
// through one command, asked again when the session has lapsed.

import type { ApiOptions } from './api';

export interface TauriInternals {
  invoke<T>(command: string, args?: Record<string, unknown>): Promise<T>;
}

/** The desktop shell's command bridge; null in a browser. */
export function shell(): TauriInternals | null {
  return (window as unknown as { __TAURI_INTERNALS__?: TauriInternals }).__TAURI_INTERNALS__ ?? null;
}

/** The `connect` command's answer. */
interface Connection {
  base: string;
  session: string;
}

export async function connection(): Promise<ApiOptions> {
  const tauri = shell();
  if (tauri) {
    const c = await tauri.invoke<Connection>('connect');
    const renew = async () => (await tauri.invoke<Connection>('connect')).session;
    return { base: c.base, session: c.session, renew };
  }
  return {};
}
