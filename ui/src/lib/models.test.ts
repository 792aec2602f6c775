import { describe, expect, it } from 'vitest';
import { formatModels, move, parseModels } from './models';

describe('models field', () => {
  it('reads plain names and aliases, skipping blanks', () => {
    expect(parseModels('gpt-4o\n\nfast = claude-haiku-4-5\n# note')).toEqual([
      { client: 'gpt-4o', upstream: 'gpt-4o' },
      { client: 'fast', upstream: 'claude-haiku-4-5' },
    ]);
    expect(formatModels(parseModels('a, b=c'))).toBe('a\nb = c');
  });

  it('reorders chains within bounds', () => {
    expect(move(['a', 'b', 'c'], 2, -1)).toEqual(['a', 'c', 'b']);
    expect(move(['a', 'b', 'c'], 0, -1)).toEqual(['a', 'b', 'c']);
    expect(move(['a', 'b', 'c'], 0, 5)).toEqual(['b', 'c', 'a']);
  });
});
