// What the Members view shows of a member, and the form it sends: kept out
// of the component so that it is tested without a browser.

import type { MemberView, NewMember } from './api';

/** `$50 / month · 60 rpm · 9,000 tpm`, or `no limits`. */
export function limits(m: MemberView): string {
  const parts: string[] = [];
  if (m.budget) parts.push(`$${m.budget.limit_usd} / ${m.budget.period}`);
  if (m.rpm) parts.push(`${m.rpm} rpm`);
  if (m.tpm) parts.push(`${m.tpm.toLocaleString('en-US')} tpm`);
  return parts.length ? parts.join(' · ') : 'no limits';
}

/** The models a member may use, or `any model`. */
export function models(m: MemberView): string {
  return m.models.length ? m.models.join(', ') : 'any model';
}

/** The add form's fields, as typed. */
export interface MemberForm {
  name: string;
  budget: string;
  rpm: string;
  tpm: string;
  models: string;
  expires: string;
}

export const emptyForm = (): MemberForm => ({ name: '', budget: '', rpm: '', tpm: '', models: '', expires: '' });

/** The form as the admin API takes it: blank fields left out, counts as numbers. */
export function toNewMember(f: MemberForm): NewMember {
  const text = (s: string) => (s.trim() === '' ? undefined : s.trim());
  const number = (s: string) => (s.trim() === '' ? undefined : Number(s.trim()));
  return {
    name: f.name.trim(),
    budget: text(f.budget),
    rpm: number(f.rpm),
    tpm: number(f.tpm),
    models: text(f.models),
    expires: text(f.expires),
  };
}
