// A finished-request event from the live stream as a history row, so live
// rows can join the table before the history query would return them.

import type { FinishedEvent, RequestFilter, RequestSummary } from './api';

/** The row a finished request will have in the history. */
export function fromEvent(e: FinishedEvent): RequestSummary {
  const b = e.request;
  const providers = new Set(b.attempts.map((a) => a.slice(0, a.lastIndexOf(':'))));
  return {
    id: b.id,
    correlation_id: b.id,
    started_at: e.at_ms - b.duration_ms,
    finished_at: e.at_ms,
    user_agent: null,
    endpoint: b.endpoint,
    model: b.model,
    streamed: false,
    outcome: b.outcome,
    status: b.status,
    provider: b.provider,
    provider_model: null,
    attempt_count: b.attempts.length,
    fallback: providers.size > 1,
    duration_ms: b.duration_ms,
    ttft_ms: b.ttft_ms,
    usage: { input_tokens: b.input_tokens, output_tokens: b.output_tokens, cached_tokens: null, cache_write_tokens: null },
    cost_usd: b.cost_usd,
    error_code: null,
    error: null,
    cache: b.cache,
    // The saving is in the history row; the table shows the status.
    saved_usd: null,
    // Named on another instance's events; this instance's own carry none
    // until the history row replaces the live one.
    instance: e.instance ?? null,
    // The member whose key made it; null for the owner.
    member: b.member ?? null,
    session: null,
    turn: null,
    // A joined gateway's device is in the history row, not the event.
    device: null,
  };
}

/** Whether a live row belongs in a table showing `f`. */
export function matches(r: RequestSummary, f: RequestFilter): boolean {
  if (f.provider && r.provider !== f.provider) return false;
  if (f.model && r.model !== f.model) return false;
  if (f.member && r.member !== f.member) return false;
  if (f.outcome && r.outcome !== f.outcome) return false;
  if (f.fallback && !r.fallback) return false;
  if (f.cache && r.cache !== f.cache) return false;
  if (f.correlation_id && r.correlation_id !== f.correlation_id) return false;
  if (f.q && !r.id.startsWith(f.q.trim()) && r.correlation_id !== f.q.trim()) return false;
  return true;
}
