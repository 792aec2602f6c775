import { describe, expect, it } from 'vitest';
import { diff, parsed, pretty, topField } from './jsondiff';

describe('diff', () => {
  it('names changed, added and removed fields and folds the rest', () => {
    const client = { model: 'fast', max_tokens: 99, top_k: 5, messages: [{ role: 'user', content: 'hi' }], a: 1, b: 2 };
    const upstream = { model: 'gpt-4o-mini', max_tokens: 99, messages: [{ role: 'user', content: 'hi' }], a: 1, b: 2, stream_options: { include_usage: true } };
    const lines = diff(client, upstream);
    expect(lines).toEqual([
      { kind: 'changed', path: 'model', depth: 1, before: '"fast"', after: '"gpt-4o-mini"' },
      { kind: 'same', path: 'max_tokens', depth: 1, text: '99' },
      { kind: 'removed', path: 'top_k', depth: 0, text: '5' },
      { kind: 'folded', path: 'messages', depth: 1, count: 3 },
      { kind: 'added', path: 'stream_options', depth: 0, text: '{"include_usage":true}' },
    ]);
  });

  it('goes into arrays index by index', () => {
    const lines = diff({ m: [1, 2, 3] }, { m: [1, 5] });
    expect(lines.map((l) => [l.kind, l.path])).toEqual([
      ['same', 'm[0]'],
      ['changed', 'm[1]'],
      ['removed', 'm[2]'],
    ]);
  });

  it('says nothing changed as one folded line', () => {
    expect(diff({ a: 1, b: [1, 2] }, { b: [1, 2], a: 1 })).toEqual([{ kind: 'same', path: '', depth: 0, text: '{"a":1,"b":[1,2]}' }]);
  });

  it('treats a change of type as a change', () => {
    expect(diff({ a: [1] }, { a: { x: 1 } })).toEqual([{ kind: 'changed', path: 'a', depth: 1, before: '[1]', after: '{"x":1}' }]);
  });
});

describe('helpers', () => {
  it('parse only JSON, print it pretty and name the top field', () => {
    expect(parsed('{"a":1}')).toEqual({ a: 1 });
    expect(parsed('not json')).toBeNull();
    expect(parsed(null)).toBeNull();
    expect(pretty('{"a":1}')).toBe('{\n  "a": 1\n}');
    expect(pretty('plain')).toBe('plain');
    expect(topField('messages[0].content')).toBe('messages');
    expect(topField('model')).toBe('model');
  });
});
