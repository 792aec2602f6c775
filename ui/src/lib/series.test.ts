import { describe, expect, it } from 'vitest';
import type { SpendRow } from './api';
import { bucketRange, bucketTime, byName, perMinute, stack, topModels } from './series';

const row = (over: Partial<SpendRow>): SpendRow => ({
  bucket: '2026-11-29', provider: 'a', model: 'm', requests: 1, failed: 0, fallbacks: 0, input_tokens: 10, output_tokens: 5,
  cached_tokens: 0, cost_usd: 0.01, saved_usd: 0, ...over,
});

describe('series', () => {
  it('reads every bucket format', () => {
    expect(bucketTime('2026-11-29')).toBe(Date.UTC(2026, 10, 29) / 1000);
    expect(bucketTime('2026-11-29T21:00Z')).toBe(Date.UTC(2026, 10, 29, 21) / 1000);
    expect(bucketTime('2026-11-29T21:05Z')).toBe(Date.UTC(2026, 10, 29, 21, 5) / 1000);
  });

  it('fills quiet minutes with zero', () => {
    const now = Date.UTC(2026, 10, 29, 21, 5, 30);
    const s = perMinute([row({ bucket: '2026-11-29T21:05Z', requests: 3 }), row({ bucket: '2026-11-29T21:03Z', provider: 'b' })], now, 5);
    expect(s.get('a')?.[1]).toEqual([0, 0, 0, 0, 3]);
    expect(s.get('b')?.[1]).toEqual([0, 0, 1, 0, 0]);
  });

  it('groups by name in time order and keeps unknown cost apart from zero', () => {
    const rows = [row({ bucket: '2026-11-30' }), row({ bucket: '2026-11-29', model: 'n', cost_usd: null })];
    const g = byName(rows, 'model', (r) => r.cost_usd);
    expect(g.times).toEqual([bucketTime('2026-11-29'), bucketTime('2026-11-30')]);
    expect(g.series).toEqual([
      { name: 'm', values: [null, 0.01] },
      { name: 'n', values: [null, null] },
    ]);
    const top = topModels(rows);
    expect(top.map((t) => t.model)).toEqual(['m', 'n']);
    expect(top[1].cost).toBeNull();
  });
});

describe('spend axis', () => {
  it('covers the whole range, with empty buckets empty', () => {
    const now = Date.UTC(2026, 10, 29, 21, 30);
    const axis = bucketRange('day', 3, now);
    expect(axis).toEqual([bucketTime('2026-11-27'), bucketTime('2026-11-28'), bucketTime('2026-11-29')]);
    const g = byName([row({ bucket: '2026-11-28', cost_usd: 0.5 })], 'provider', (r) => r.cost_usd, axis);
    expect(g.series[0].values).toEqual([null, 0.5, null]);
    expect(bucketRange('hour', 2, now)).toEqual([bucketTime('2026-11-29T20:00Z'), bucketTime('2026-11-29T21:00Z')]);
  });

  it('ranks models with what the cache saved for them', () => {
    const top = topModels([row({ saved_usd: 0.02 }), row({ bucket: '2026-11-29', saved_usd: 0.01 })]);
    expect(top).toHaveLength(1);
    expect(top[0].saved).toBeCloseTo(0.03);
    expect(top[0].requests).toBe(2);
  });

  it('stacks tallest first', () => {
    const s = stack([{ name: 'a', values: [1, null] }, { name: 'b', values: [2, 3] }]);
    expect(s).toEqual([{ name: 'b', values: [3, 3] }, { name: 'a', values: [1, null] }]);
  });
});
