import { describe, expect, it } from 'vitest';
import { parse, timedAs } from './route.svelte';

describe('routes', () => {
  it('read the view, its argument and parameters', () => {
    expect(parse('#/requests/01a2').view).toBe('requests');
    expect(parse('#/requests/01a2').arg).toBe('01a2');
    expect(parse('#/login?expired=1').params.get('expired')).toBe('1');
    expect(parse('').view).toBe('overview');
    expect(parse('#/nonsense').view).toBe('overview');
  });

  it('time a view and an item of it under names of their own', () => {
    expect(timedAs(parse('#/requests'))).toBe('requests');
    expect(timedAs(parse('#/requests/01a2'))).toBe('requests/item');
    expect(timedAs(parse(''))).toBe('overview');
  });
});
