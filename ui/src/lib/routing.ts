// How the Providers view words a route's strategy and its recent split.

import type { Share, Strategy } from './contract';

/** The strategies a route can take, in the order the select lists them. */
export const STRATEGIES: { value: Strategy; label: string }[] = [
  { value: 'ordered', label: 'Ordered (fallback chain)' },
  { value: 'latency', label: 'Lowest latency' },
  { value: 'least_busy', label: 'Least busy' },
  { value: 'cheapest', label: 'Cheapest' },
  { value: 'weighted', label: 'Weighted' },
];

/** `a 90% · b 10%`, or a word for no traffic yet. */
export function splitText(split: Share[], windowSeconds: number): string {
  const total = split.reduce((n, s) => n + s.requests, 0);
  const minutes = Math.round(windowSeconds / 60);
  if (total === 0) return `no requests in the last ${minutes} min`;
  const parts = split.filter((s) => s.requests > 0).map((s) => `${s.provider} ${Math.round(s.share * 100)}%`);
  return `${parts.join(' · ')} of ${total} in the last ${minutes} min`;
}
