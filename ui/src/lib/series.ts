// Spend rows into chart series: one value per bucket and name, gaps as zero
// requests (a quiet minute) or null cost (nothing known).

import type { SpendRow } from './api';

/** Bucket text (`2026-11-29`, `2026-11-29T21:00Z`, `2026-11-29T21:05Z`) to Unix seconds. */
export function bucketTime(bucket: string): number {
  const iso = bucket.length === 10 ? `${bucket}T00:00Z` : bucket;
  return Date.parse(iso) / 1000;
}

/** Requests per minute for each provider over the last `minutes`, ending now. */
export function perMinute(rows: SpendRow[], now: number, minutes = 60): Map<string, [number[], number[]]> {
  const end = Math.floor(now / 60_000) * 60;
  const times = Array.from({ length: minutes }, (_, i) => end - (minutes - 1 - i) * 60);
  const index = new Map(times.map((t, i) => [t, i]));
  const out = new Map<string, [number[], number[]]>();
  for (const r of rows) {
    const i = index.get(bucketTime(r.bucket));
    if (i === undefined) continue;
    let s = out.get(r.provider);
    if (!s) {
      s = [times, new Array(minutes).fill(0)];
      out.set(r.provider, s);
    }
    s[1][i] += r.requests;
  }
  return out;
}

/** Every bucket start (Unix seconds, UTC as the history groups them) from `count` buckets ago to now. */
export function bucketRange(bucket: 'day' | 'hour', count: number, now: number): number[] {
  const step = bucket === 'day' ? 86_400 : 3600;
  const end = Math.floor(now / 1000 / step) * step;
  return Array.from({ length: count }, (_, i) => end - (count - 1 - i) * step);
}

export interface Series {
  name: string;
  values: (number | null)[];
}

/** Values per bucket for each name (`key` picks provider or model), on `times` (or the rows' own buckets). */
export function byName(
  rows: SpendRow[],
  key: 'provider' | 'model',
  value: (r: SpendRow) => number | null,
  axis?: number[],
): { times: number[]; series: Series[] } {
  const times = axis ?? [...new Set(rows.map((r) => bucketTime(r.bucket)))].sort((a, b) => a - b);
  const at = new Map(times.map((t, i) => [t, i]));
  const names = new Map<string, (number | null)[]>();
  for (const r of rows) {
    const values = names.get(r[key]) ?? new Array<number | null>(times.length).fill(null);
    names.set(r[key], values);
    const i = at.get(bucketTime(r.bucket));
    const v = value(r);
    if (i !== undefined && v !== null) values[i] = (values[i] ?? 0) + v;
  }
  return { times, series: [...names].map(([name, values]) => ({ name, values })) };
}

/** Models ranked by cost (unknown cost last), with their tokens and what the cache saved. */
export function topModels(rows: SpendRow[], limit = 10) {
  type Top = { model: string; provider: string; requests: number; tokens: number; cost: number | null; saved: number };
  const totals = new Map<string, Top>();
  for (const r of rows) {
    const k = `${r.provider}\u0000${r.model}`;
    const t = totals.get(k) ?? { model: r.model, provider: r.provider, requests: 0, tokens: 0, cost: null, saved: 0 };
    t.requests += r.requests;
    t.tokens += r.input_tokens + r.output_tokens;
    t.saved += r.saved_usd;
    if (r.cost_usd !== null) t.cost = (t.cost ?? 0) + r.cost_usd;
    totals.set(k, t);
  }
  return [...totals.values()].sort((a, b) => (b.cost ?? -1) - (a.cost ?? -1)).slice(0, limit);
}

/**
 * Stacks series for bars drawn over each other: each becomes the running
 * total up to it, listed tallest first so every one stays visible.
 */
export function stack(series: Series[]): Series[] {
  const totals: number[] = [];
  const stacked = series.map((s) => ({
    name: s.name,
    values: s.values.map((v, i) => {
      totals[i] = (totals[i] ?? 0) + (v ?? 0);
      return totals[i] === 0 && v === null ? null : totals[i];
    }),
  }));
  return stacked.reverse();
}
