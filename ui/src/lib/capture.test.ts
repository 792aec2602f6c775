import { describe, expect, it } from 'vitest';
import { captureFor, captureMinutes, MAX_CAPTURE_MINUTES } from './capture';

describe('capture for M minutes', () => {
  it('takes a whole number of minutes within the bounds', () => {
    expect(captureMinutes('10')).toEqual({ ok: true, minutes: 10 });
    expect(captureMinutes(' 1 ')).toEqual({ ok: true, minutes: 1 });
    expect(captureMinutes(String(MAX_CAPTURE_MINUTES))).toEqual({ ok: true, minutes: 1440 });
  });

  it('refuses what is not one, saying why', () => {
    for (const bad of ['', '  ', '0', '1441', '99999999', '-5', '2.5', '1e3', 'ten', '10m']) {
      const read = captureMinutes(bad);
      expect(read.ok, bad).toBe(false);
      if (!read.ok) expect(read.error.length, bad).toBeGreaterThan(0);
    }
    expect(captureMinutes('0')).toEqual({ ok: false, error: 'At least 1 minute.' });
    expect(captureMinutes('1441')).toEqual({ ok: false, error: 'At most 1440 minutes (a day).' });
  });

  it('sets the switch until then, with no count', () => {
    expect(captureFor(15, 1_000)).toEqual({ remaining: 0, until_ms: 1_000 + 15 * 60_000 });
  });
});
