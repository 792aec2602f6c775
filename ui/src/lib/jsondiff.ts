// A JSON-aware diff for the request inspector: what the gateway changed
// between the client's body and the one it sent upstream. Objects are
// compared key by key and arrays index by index, so a moved field is not a
// change; unchanged stretches are folded into one line saying how many.

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** One line of the diff, at a depth of nesting. */
export type DiffLine =
  | { kind: 'same' | 'added' | 'removed'; path: string; depth: number; text: string }
  | { kind: 'changed'; path: string; depth: number; before: string; after: string }
  | { kind: 'folded'; path: string; depth: number; count: number };

const isObject = (v: Json): v is { [key: string]: Json } => v !== null && typeof v === 'object' && !Array.isArray(v);

const show = (v: Json): string => JSON.stringify(v);

/** Equal as JSON: the order of an object's keys does not count. */
function same(a: Json, b: Json): boolean {
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => k in b && same(a[k], b[k]));
  }
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => same(v, b[i]));
  return a === b;
}

const join = (path: string, key: string | number): string =>
  typeof key === 'number' ? `${path}[${key}]` : path ? `${path}.${key}` : key;

/** Lines for `before` → `after`; equal neighbours folded into one line. */
export function diff(before: Json, after: Json): DiffLine[] {
  return fold(walk(before, after, '', 0));
}

function walk(a: Json, b: Json, path: string, depth: number): DiffLine[] {
  if (same(a, b)) return [{ kind: 'same', path, depth, text: show(a) }];
  if (isObject(a) && isObject(b)) {
    const keys = [...Object.keys(a), ...Object.keys(b).filter((k) => !(k in a))];
    return keys.flatMap((k) => {
      const p = join(path, k);
      if (!(k in b)) return [{ kind: 'removed' as const, path: p, depth, text: show(a[k]) }];
      if (!(k in a)) return [{ kind: 'added' as const, path: p, depth, text: show(b[k]) }];
      return walk(a[k], b[k], p, depth + 1);
    });
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    const n = Math.max(a.length, b.length);
    const lines: DiffLine[] = [];
    for (let i = 0; i < n; i++) {
      const p = join(path, i);
      if (i >= b.length) lines.push({ kind: 'removed', path: p, depth, text: show(a[i]) });
      else if (i >= a.length) lines.push({ kind: 'added', path: p, depth, text: show(b[i]) });
      else lines.push(...walk(a[i], b[i], p, depth + 1));
    }
    return lines;
  }
  return [{ kind: 'changed', path, depth, before: show(a), after: show(b) }];
}

/** Runs of unchanged lines become one folded line (a single one stays). */
function fold(lines: DiffLine[]): DiffLine[] {
  const out: DiffLine[] = [];
  let run: DiffLine[] = [];
  const flush = () => {
    if (run.length === 1) out.push(run[0]);
    else if (run.length > 1) out.push({ kind: 'folded', path: run[0].path, depth: run[0].depth, count: run.length });
    run = [];
  };
  for (const line of lines) {
    if (line.kind === 'same') run.push(line);
    else {
      flush();
      out.push(line);
    }
  }
  flush();
  return out;
}

/** The text as JSON, or null when it is not (a cut body, an error page). */
export function parsed(text: string | null | undefined): Json | null {
  if (!text) return null;
  try {
    return JSON.parse(text) as Json;
  } catch {
    return null;
  }
}

/** The text pretty-printed when it is JSON, else as it is. */
export function pretty(text: string): string {
  const v = parsed(text);
  return v === null ? text : JSON.stringify(v, null, 2);
}

/** The top-level field a change label names, for matching it to diff lines. */
export function topField(path: string): string {
  return path.split(/[.[]/)[0];
}
