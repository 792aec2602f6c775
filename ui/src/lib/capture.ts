// The inspector's capture switch: how long "capture for M minutes" may run,
// read from what the user typed, and what it sends to `PUT /admin/capture`.
import type { SwitchState } from './contract';

/** The longest capture the dashboard offers: a day. Bodies are kept for
 * every request meanwhile, so an hour is usually plenty. */
export const MAX_CAPTURE_MINUTES = 24 * 60;

export type Minutes = { ok: true; minutes: number } | { ok: false; error: string };

/** A whole number of minutes from 1 to {@link MAX_CAPTURE_MINUTES}, or why not. */
export function captureMinutes(text: string): Minutes {
  const t = text.trim();
  if (t === '') return { ok: false, error: 'Say for how many minutes.' };
  if (!/^\d+$/.test(t)) return { ok: false, error: 'Minutes are a whole number, like 10.' };
  const minutes = Number(t);
  if (minutes < 1) return { ok: false, error: 'At least 1 minute.' };
  if (minutes > MAX_CAPTURE_MINUTES) return { ok: false, error: `At most ${MAX_CAPTURE_MINUTES} minutes (a day).` };
  return { ok: true, minutes };
}

/** The switch for every request during `minutes` from `now` (Unix ms). */
export function captureFor(minutes: number, now: number): SwitchState {
  return { remaining: 0, until_ms: now + minutes * 60_000 };
}
