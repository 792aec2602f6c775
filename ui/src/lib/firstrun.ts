// The Overview's first-run walk-through: which providers can serve now,
// which wait for a key, and which local servers do not answer yet.

import type { ProviderView } from './api';

export interface FirstRun {
  /** Enabled providers that can take a request now (a key, or a local server that answers). */
  ready: ProviderView[];
  /** Enabled providers that wait for their first key. */
  needKey: ProviderView[];
  /** Enabled local servers (no key) whose probes get no answer. */
  localDown: ProviderView[];
  /** Of `ready`, the local servers that answer: no key needed. */
  localUp: ProviderView[];
}

const SERVING = new Set(['healthy', 'degraded', 'unknown']);

/** A provider that takes no key: a local server such as Ollama. */
const keyless = (p: ProviderView): boolean => p.keys.length === 0 && p.state !== 'no_key';

export function firstRun(providers: ProviderView[]): FirstRun {
  const enabled = providers.filter((p) => p.enabled);
  const ready = enabled.filter((p) => SERVING.has(p.state));
  return {
    ready,
    needKey: enabled.filter((p) => p.state === 'no_key'),
    localDown: enabled.filter((p) => keyless(p) && p.state === 'unreachable'),
    // Known to answer: probed (or used), not merely never checked.
    localUp: ready.filter((p) => keyless(p) && p.state !== 'unknown'),
  };
}
