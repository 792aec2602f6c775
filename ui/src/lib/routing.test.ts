import { describe, expect, it } from 'vitest';
import { routedText, splitText, STRATEGIES, weightsFor } from './routing';

describe('routing', () => {
  it('words a split as shares of the window', () => {
    const split = [
      { provider: 'a', requests: 9, share: 0.9 },
      { provider: 'b', requests: 1, share: 0.1 },
      { provider: 'c', requests: 0, share: 0 },
    ];
    expect(splitText(split, 300)).toBe('a 90% · b 10% of 10 in the last 5 min');
    expect(splitText([], 300)).toBe('no requests in the last 5 min');
  });

  it('lists every strategy once, ordered first', () => {
    expect(STRATEGIES.map((s) => s.value)).toEqual(['ordered', 'latency', 'least_busy', 'cheapest', 'weighted']);
  });

  it("words an attempt's routing from its figures, and nothing in chain order", () => {
    const routing = [
      { seq: 1, routing: { strategy: 'least_busy' as const, rank: 0, explored: false, latency_ms: 80.4, in_flight: 3, usd: null, weight: null } },
      { seq: 2, routing: { strategy: 'latency' as const, rank: 1, explored: true, latency_ms: null, in_flight: null, usd: null, weight: null } },
    ];
    expect(routedText(routing, 1)).toBe('least busy #1: 80 ms, 3 in flight');
    expect(routedText(routing, 2)).toBe('latency #2: exploring');
    expect(routedText(routing, 3)).toBeNull();
  });

  it("keeps each provider's weight when a weighted chain is reordered", () => {
    const before = { chain: ['a', 'b'], weights: [9, 1] };
    expect(weightsFor(before, ['b', 'a'])).toEqual([1, 9]);
    expect(weightsFor(before, ['b', 'a', 'c'])).toEqual([1, 9, 1]);
    expect(weightsFor({ chain: ['a'], weights: null }, ['a', 'b'])).toBeUndefined();
  });
});
