import { describe, expect, it } from 'vitest';
import { splitText, STRATEGIES } from './routing';

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
});
