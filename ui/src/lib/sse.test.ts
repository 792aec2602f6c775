import { describe, expect, it } from 'vitest';
import { SseParser } from './sse';

describe('SseParser', () => {
  it('splits messages across chunks and joins data lines', () => {
    const p = new SseParser();
    expect(p.push('event: snap')).toEqual([]);
    expect(p.push('shot\nid: 7\ndata: {"a":\ndata: 1}\n')).toEqual([]);
    expect(p.push('\n')).toEqual([{ event: 'snapshot', id: '7', data: '{"a":\n1}' }]);
  });

  it('ignores comments, handles CRLF and keeps the last id', () => {
    const p = new SseParser();
    const got = p.push(': keep-alive\r\n\r\nid: 9\r\ndata: x\r\n\r\ndata: y\n\n');
    expect(got).toEqual([
      { event: 'message', id: '9', data: 'x' },
      { event: 'message', id: '9', data: 'y' },
    ]);
  });
});
