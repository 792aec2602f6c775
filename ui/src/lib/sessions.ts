// What the Sessions view draws of a session: its cost so far and its cache
// hit rate so far after each request, as SVG polyline points. Kept out of
// the component so that it is tested without a browser.

import type { RequestSummary, SessionSummary } from './api';

/** One point of a curve: when, and the value then. */
export interface Point {
  at: number;
  value: number;
}

/** Cost so far after each request, oldest first (an unpriced request adds nothing). */
export function costCurve(timeline: RequestSummary[]): Point[] {
  let total = 0;
  return timeline.map((r) => ({ at: r.started_at, value: (total += r.cost_usd ?? 0) }));
}

/** Cache reads over input so far after each request, oldest first (0 before any input). */
export function cacheCurve(timeline: RequestSummary[]): Point[] {
  let input = 0;
  let read = 0;
  return timeline.map((r) => {
    input += r.usage.input_tokens ?? 0;
    read += r.usage.cached_tokens ?? 0;
    return { at: r.started_at, value: input > 0 ? read / input : 0 };
  });
}

/** `x,y` pairs in a `width` × `height` box, time across, 0 at the bottom up to `top` (the curve's own max by default). */
export function polyline(points: Point[], width: number, height: number, top?: number): string {
  if (points.length === 0) return '';
  const first = points[0].at;
  const span = Math.max(1, points[points.length - 1].at - first);
  const max = top ?? Math.max(...points.map((p) => p.value));
  const y = (v: number) => (max > 0 ? height - (v / max) * height : height);
  const x = (at: number) => (points.length === 1 ? width : ((at - first) / span) * width);
  return points.map((p) => `${x(p.at).toFixed(1)},${y(p.value).toFixed(1)}`).join(' ');
}

/** The members whose keys made a session's requests, or a dash for the owner's. */
export function membersText(s: Pick<SessionSummary, 'members'>): string {
  return s.members.length > 0 ? s.members.join(', ') : '—';
}

/** Whether the Sessions view has a member column: some session has a member. */
export function withMembers(sessions: Pick<SessionSummary, 'members'>[]): boolean {
  return sessions.some((s) => s.members.length > 0);
}

/** `claude-code 2.1.197`, or the raw user agent's absence. */
export function clientText(s: Pick<SessionSummary, 'client' | 'client_version'>): string {
  if (!s.client) return '—';
  return s.client_version ? `${s.client} ${s.client_version}` : s.client;
}

/** What a request was to its conversation: the user's own turn, or an agent's follow-up with tool results. */
export function turnText(r: Pick<RequestSummary, 'turn'>): string {
  if (r.turn === true) return 'turn';
  if (r.turn === false) return 'tool results';
  return '—';
}

/** Cache reads and writes of a request, as `read / written` (a dash where the provider said nothing). */
export function cacheText(r: Pick<RequestSummary, 'usage'>): string {
  const n = (v: number | null | undefined) => (v == null ? '—' : v.toLocaleString('en-US'));
  return `${n(r.usage.cached_tokens)} / ${n(r.usage.cache_write_tokens)}`;
}
