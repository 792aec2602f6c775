import { describe, expect, it } from 'vitest';
import type { ProviderView } from './api';
import { firstRun } from './firstrun';

function p(name: string, state: ProviderView['state'], keys = 0, enabled = true): ProviderView {
  const k = { label: 'default', last4: 'abcd', status: 'ok' as const, detail: null };
  return { name, state, enabled, keys: Array.from({ length: keys }, () => k) } as unknown as ProviderView;
}

describe('first run', () => {
  it('lists who waits for a key, and a local server only once it answers', () => {
    const run = firstRun([p('openai', 'no_key'), p('ollama', 'unreachable'), p('off', 'no_key', 0, false)]);
    expect(run.ready).toEqual([]);
    expect(run.needKey.map((x) => x.name)).toEqual(['openai']);
    expect(run.localDown.map((x) => x.name)).toEqual(['ollama']);

    const later = firstRun([p('openai', 'unknown', 1), p('ollama', 'healthy')]);
    expect(later.ready.map((x) => x.name)).toEqual(['openai', 'ollama']);
    expect(later.localUp.map((x) => x.name)).toEqual(['ollama']);
    expect(later.needKey).toEqual([]);
  });
});
