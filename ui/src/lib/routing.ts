// How the Providers view words a route's strategy and its recent split.

import type { AttemptRouting, Share, Strategy } from './contract';

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

/**
 * Why a route's strategy chose an attempt's provider, in words: `latency #1:
 * 212 ms`; null for an attempt in chain order. The history stores figures;
 * they are worded here, when shown.
 */
export function routedText(routing: AttemptRouting[], seq: number): string | null {
  const r = routing.find((x) => x.seq === seq)?.routing;
  if (!r) return null;
  const figures: string[] = [];
  if (r.explored) figures.push('exploring');
  if (r.latency_ms !== null) figures.push(`${Math.round(r.latency_ms)} ms`);
  if (r.in_flight !== null) figures.push(`${r.in_flight} in flight`);
  if (r.usd !== null) figures.push(`$${r.usd.toFixed(6)}`);
  if (r.weight !== null) figures.push(`weight ${r.weight}`);
  const head = `${r.strategy.replace('_', ' ')} #${r.rank + 1}`;
  return figures.length ? `${head}: ${figures.join(', ')}` : head;
}

/**
 * The weights for `chain` when a weighted route's chain changes: each
 * provider keeps its weight, one new to the chain weighs 1; none for a
 * route without weights.
 */
export function weightsFor(
  before: { chain: string[]; weights: number[] | null },
  chain: string[],
): number[] | undefined {
  const weights = before.weights;
  if (!weights) return undefined;
  return chain.map((name) => weights[before.chain.indexOf(name)] ?? 1);
}
