import { describe, expect, it } from 'vitest';
import type { MemberView } from './api';
import { emptyForm, limits, models, toNewMember } from './members';

const member = (over: Partial<MemberView> = {}): MemberView => ({
  name: 'al',
  state: 'active',
  created_at_ms: 0,
  expires_at_ms: null,
  revoked_at_ms: null,
  budget: null,
  rpm: null,
  tpm: null,
  models: [],
  ...over,
});

describe('members', () => {
  it('names each limit a member has, or none', () => {
    expect(limits(member())).toBe('no limits');
    expect(limits(member({ budget: { limit_usd: 50, period: 'month' }, rpm: 60, tpm: 9000 }))).toBe(
      '$50 / month · 60 rpm · 9,000 tpm',
    );
    expect(models(member())).toBe('any model');
    expect(models(member({ models: ['claude-*', 'gpt-4.1'] }))).toBe('claude-*, gpt-4.1');
  });

  it('sends only the fields filled in', () => {
    const form = { ...emptyForm(), name: ' al ', budget: '50/month', rpm: '60', models: 'claude-*' };
    expect(toNewMember(form)).toEqual({
      name: 'al',
      budget: '50/month',
      rpm: 60,
      tpm: undefined,
      models: 'claude-*',
      expires: undefined,
    });
  });
});
