import { describe, expect, it } from 'vitest';
import { parse } from './route.svelte';

describe('routes', () => {
  it('read the view, its argument and parameters', () => {
    expect(parse('#/requests/01a2').view).toBe('requests');
    expect(parse('#/requests/01a2').arg).toBe('01a2');
    expect(parse('#/login?expired=1').params.get('expired')).toBe('1');
    expect(parse('').view).toBe('overview');
    expect(parse('#/nonsense').view).toBe('overview');
  });
});
