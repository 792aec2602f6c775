// The attempt waterfall's layout: every attempt, its backoff before it and
// its markers placed on one time axis from the request's start.

import type { Attempt, RequestDetail } from './api';

export interface Bar {
  seq: number;
  label: string;
  provider: string;
  /** Left edge and width as fractions (0–1) of the axis. */
  left: number;
  width: number;
  /** The wait before this attempt (backoff or throttle), if any. */
  gap: { left: number; width: number; ms: number } | null;
  /** First byte and first token, as fractions of the axis. */
  ttfb: number | null;
  ttft: number | null;
  /** The attempt was cut by its own timeout. */
  timedOut: boolean;
  /** This attempt is the hop to another provider. */
  fallback: boolean;
  /** Passed over without a call; `why` says what kept it from being called. */
  skipped: boolean;
  why: string | null;
  tone: 'ok' | 'bad' | 'muted';
}

export interface Layout {
  /** The axis length in milliseconds. */
  span: number;
  bars: Bar[];
  ticks: { at: number; label: string }[];
  /** The request's own first token, as a fraction of the axis. */
  ttft: number | null;
}

/** A round step giving about `count` ticks over `span` ms. */
export function tickStep(span: number, count = 5): number {
  const raw = span / count;
  const magnitude = 10 ** Math.floor(Math.log10(Math.max(raw, 1e-3)));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (raw <= m * magnitude) return m * magnitude;
  }
  return 10 * magnitude;
}

function tickLabel(at: number): string {
  return at >= 1000 ? `${+(at / 1000).toFixed(2)} s` : `${+at.toFixed(1)} ms`;
}

function tone(a: Attempt): Bar['tone'] {
  if (a.outcome === 'ok') return 'ok';
  if (a.outcome === 'canceled' || a.outcome === 'skipped' || a.outcome === 'hedged') return 'muted';
  return 'bad';
}

export function layout(r: Pick<RequestDetail, 'attempts' | 'duration_ms' | 'ttft_ms'>): Layout {
  const ends = r.attempts.map((a) => a.offset_ms + (a.duration_ms ?? 0));
  const span = Math.max(r.duration_ms, ...ends, 1);
  const at = (x: number) => Math.min(1, Math.max(0, x / span));
  const bars = r.attempts.map((a): Bar => {
    const duration = a.duration_ms ?? Math.max(0, r.duration_ms - a.offset_ms);
    const gapMs = a.backoff_ms > 0 ? Math.min(a.backoff_ms, a.offset_ms) : 0;
    const skipped = a.outcome === 'skipped';
    // A skip is no hop: the provider it was passed over for is the next one's.
    const hop = a.reason === 'fallback' && !skipped;
    return {
      seq: a.seq,
      label: skipped
        ? `${a.provider} (skipped)`
        : hop
          ? `${a.provider} (fallback from ${a.fallback_from ?? '?'})`
          : a.reason === 'hedge'
            ? `${a.provider} (hedge)`
            : a.reason === 'resume'
              ? `${a.provider} (resumes the stream)`
              : a.provider,
      provider: a.provider,
      left: at(a.offset_ms),
      width: Math.max(at(duration), 0.002),
      gap: gapMs > 0 ? { left: at(a.offset_ms - gapMs), width: at(gapMs), ms: gapMs } : null,
      ttfb: a.ttfb_ms === null ? null : at(a.offset_ms + a.ttfb_ms),
      ttft: a.ttft_ms === null ? null : at(a.offset_ms + a.ttft_ms),
      timedOut: a.outcome === 'timeout',
      fallback: hop,
      skipped,
      why: skipped ? a.error : null,
      tone: tone(a),
    };
  });
  const step = tickStep(span);
  const ticks = [];
  for (let t = 0; t <= span + 1e-9; t += step) ticks.push({ at: at(t), label: tickLabel(t) });
  return { span, bars, ticks, ttft: r.ttft_ms === null ? null : at(r.ttft_ms) };
}

/** What the translation for attempt `seq` left out: the drop table's rows
 * (`field: reason`), then what the gateway did not know (`path: what became of it`). */
export function leftOut(
  d: Pick<RequestDetail, 'dropped'>,
  seq: number,
): { known: string[]; unmapped: string[]; redacted: string | null } {
  const marker = ': unmapped: ';
  // `[server] redact_outgoing` notes its count among what an attempt left out.
  const isRedaction = (f: string) => f.startsWith('prompt: ') && f.includes('redact_outgoing');
  const all = d.dropped.find((x) => x.seq === seq)?.fields ?? [];
  const fields = all.filter((f) => !isRedaction(f));
  const redaction = all.find(isRedaction);
  return {
    known: fields.filter((f) => !f.includes(marker)),
    unmapped: fields.filter((f) => f.includes(marker)).map((f) => f.replace(marker, ': ')),
    redacted: redaction ? redaction.replace(/^prompt: /, '') : null,
  };
}
