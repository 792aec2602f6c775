// The models field of the provider form: one model a line, `alias = name`
// when clients use another name than the provider does.

import type { ModelAlias } from './api';

export function parseModels(text: string): ModelAlias[] {
  return text
    .split(/\n|,/)
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => {
      const [client, upstream] = line.split('=').map((s) => s.trim());
      return { client, upstream: upstream || client };
    });
}

export function formatModels(models: ModelAlias[]): string {
  return models.map((m) => (m.client === m.upstream ? m.client : `${m.client} = ${m.upstream}`)).join('\n');
}

/** Moves item `i` by `by` places, staying in bounds. */
export function move<T>(list: T[], i: number, by: number): T[] {
  const j = Math.min(list.length - 1, Math.max(0, i + by));
  const out = [...list];
  const [item] = out.splice(i, 1);
  out.splice(j, 0, item);
  return out;
}
