// The Tools view's data: which coding tools are installed and connected
// (from the desktop shell, which edits their files: a browser cannot), and
// the last request the gateway saw from each (by user agent, from the
// admin API). Kept apart from api.ts: the shell's commands are not the
// gateway's API.

import type { Api } from './api';
import type { RequestOutcome } from './contract';
import { shell } from './connection';

/** One user agent the gateway saw (`GET /admin/clients`). */
export interface ClientSeen {
  user_agent: string;
  requests: number;
  last_at: number;
  last_id: string;
  last_model: string | null;
  last_outcome: RequestOutcome;
}

/** One tool as the shell's `tools_status` command reports it. */
export interface ToolStatus {
  id: string;
  name: string;
  /** Where it is on PATH, or null. */
  installed: string | null;
  connected: boolean;
  /** Connected, but its settings were edited since. */
  changed: boolean;
  base_url: string | null;
  files: string[];
  user_agents: string[];
  note: string | null;
}

export async function clients(api: Api): Promise<ClientSeen[]> {
  return (await api.request<{ clients: ClientSeen[] }>('GET', '/admin/clients')).clients;
}

/** Every tool's status; null outside the desktop app. */
export async function toolStatuses(): Promise<ToolStatus[] | null> {
  const s = shell();
  return s ? s.invoke<ToolStatus[]>('tools_status') : null;
}

/** Connects a tool that is not connected, disconnects one that is. */
export async function toggleTool(id: string): Promise<ToolStatus[]> {
  const s = shell();
  if (!s) throw new Error('connecting tools needs the desktop app or `switchyard connect`');
  return s.invoke<ToolStatus[]>('tool_toggle', { id });
}

/** The most recent client whose user agent is this tool's. */
export function lastSeen(tool: Pick<ToolStatus, 'user_agents'>, seen: ClientSeen[]): ClientSeen | null {
  const mine = seen.filter((c) => tool.user_agents.some((prefix) => c.user_agent.startsWith(prefix)));
  return mine.reduce<ClientSeen | null>((best, c) => (!best || c.last_at > best.last_at ? c : best), null);
}

/** The shell's gateway: `listening`, `paused`, …; null in a browser. */
export async function gatewayState(): Promise<string | null> {
  const s = shell();
  return s ? s.invoke<string>('gateway_state').catch(() => null) : null;
}

export async function resumeGateway(): Promise<void> {
  await shell()?.invoke('resume');
}
