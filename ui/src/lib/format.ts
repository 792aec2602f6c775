// Numbers and states in words, the same everywhere in the dashboard.

import type { AttemptOutcome, CacheStatus, ProviderStateName, ProviderView, RequestOutcome } from './api';

export function ms(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '—';
  if (value < 1) return `${value.toFixed(2)} ms`;
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 60_000) return `${(value / 1000).toFixed(value < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(value / 60_000)} min ${Math.round((value % 60_000) / 1000)} s`;
}

/** USD: small amounts keep their significant digits; unknown is not zero. */
export function usd(value: number | null | undefined): string {
  if (value === null || value === undefined) return '—';
  if (value === 0) return '$0';
  if (value < 0.01) return `$${value.toPrecision(2)}`;
  if (value < 1) return `$${+value.toPrecision(3)}`;
  return `$${value.toFixed(2)}`;
}

export function count(value: number | null | undefined): string {
  if (value === null || value === undefined) return '—';
  if (value >= 1_000_000) return `${(value / 1_000_000).toFixed(1)}M`;
  if (value >= 10_000) return `${Math.round(value / 1000)}k`;
  if (value >= 1000) return `${(value / 1000).toFixed(1)}k`;
  return String(Math.round(value));
}

export function percent(rate: number | null | undefined): string {
  if (rate === null || rate === undefined) return '—';
  const p = rate * 100;
  return `${p >= 99.95 || p === 0 ? p.toFixed(0) : p.toFixed(1)}%`;
}

export function clock(atMs: number): string {
  return new Date(atMs).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
}

/** The time alone for today, with the date otherwise. */
export function shortTime(atMs: number, now = Date.now()): string {
  return new Date(atMs).toDateString() === new Date(now).toDateString() ? clock(atMs) : dateTime(atMs);
}

export function dateTime(atMs: number): string {
  const d = new Date(atMs);
  return `${d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' })} ${clock(atMs)}`;
}

/** "42 s", "3 min", "2 h": how long until a moment. */
export function until(atMs: number, now: number): string {
  const s = Math.max(0, Math.round((atMs - now) / 1000));
  if (s < 90) return `${s} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${Math.round(s / 3600)} h`;
}

export const STATE_WORDS: Record<ProviderStateName, string> = {
  healthy: 'Healthy',
  degraded: 'Degraded',
  rate_limited: 'Rate-limited',
  open: 'Breaker open',
  disabled: 'Disabled',
  no_key: 'No key',
  unknown: 'Not checked yet',
  unreachable: 'Unreachable',
};

/** A provider's state as a person would say it, with its end time when it has one. */
export function stateLine(p: Pick<ProviderView, 'state' | 'until_ms'>, now: number): string {
  const words = STATE_WORDS[p.state] ?? p.state;
  if ((p.state === 'rate_limited' || p.state === 'open') && p.until_ms) {
    return `${words} until ${clock(p.until_ms)} (${until(p.until_ms, now)})`;
  }
  // For a dead server, `until_ms` is when it is probed again.
  if (p.state === 'unreachable' && p.until_ms) return `${words} · next probe in ${until(p.until_ms, now)}`;
  return words;
}

/** Every way a request can end, in words; its keys are the filter's choices. */
export const REQUEST_OUTCOME_WORDS: Record<RequestOutcome, string> = {
  ok: 'OK',
  provider_error: 'Provider error',
  error: 'Gateway error',
  rejected: 'Rejected',
  failed: 'Failed mid-stream',
  canceled: 'Client left',
};

/** The outcomes a request can have, in the order the filter offers them. */
export const REQUEST_OUTCOMES = Object.keys(REQUEST_OUTCOME_WORDS) as RequestOutcome[];

/** What the response cache did for a request, in words; its keys are the filter's choices. */
export const CACHE_WORDS: Record<CacheStatus, string> = {
  hit: 'Hit',
  stale: 'Stale',
  miss: 'Miss',
  bypass: 'Bypass',
};

/** The cache statuses, in the order the filter offers them. */
export const CACHE_STATUSES = Object.keys(CACHE_WORDS) as CacheStatus[];

/** A cache status in words; a dash when the cache was not consulted. */
export function cacheWords(status: CacheStatus | null | undefined): string {
  return status ? CACHE_WORDS[status] : '—';
}

/** Answered from the cache (fresh or stale), only looked up, or left alone. */
export function cacheTone(status: CacheStatus | null | undefined): 'ok' | 'warn' | 'muted' {
  if (status === 'hit') return 'ok';
  if (status === 'stale') return 'warn';
  return 'muted';
}

const ATTEMPT_OUTCOME_WORDS: Record<AttemptOutcome, string> = {
  ok: 'OK',
  http_error: 'HTTP error',
  connect_error: 'Connect error',
  transport_error: 'Transport error',
  timeout: 'Timed out',
  stream_error: 'Error event',
  stream_dropped: 'Dropped',
  mid_stream_failure: 'Failed mid-stream',
  canceled: 'Client left',
  skipped: 'Skipped',
  hedged: 'Let go (hedge)',
};

const OUTCOME_WORDS: Record<string, string> = { ...ATTEMPT_OUTCOME_WORDS, ...REQUEST_OUTCOME_WORDS };

export function outcomeWords(outcome: RequestOutcome | AttemptOutcome): string {
  return OUTCOME_WORDS[outcome] ?? outcome.replace(/_/g, ' ');
}

/** Whether an outcome is a success, a failure or neither (the client left). */
export function outcomeTone(outcome: RequestOutcome | AttemptOutcome): 'ok' | 'bad' | 'muted' {
  if (outcome === 'ok') return 'ok';
  // The client left, sent what no provider could take, or a provider was
  // passed over without a call or let go for its hedge.
  if (outcome === 'canceled' || outcome === 'rejected' || outcome === 'skipped' || outcome === 'hedged') return 'muted';
  return 'bad';
}
