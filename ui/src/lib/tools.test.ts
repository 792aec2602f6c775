import { describe, expect, it } from 'vitest';
import { lastSeen, type ClientSeen } from './tools';

const seen = (user_agent: string, last_at: number): ClientSeen => ({
  user_agent, last_at, requests: 1, last_id: `r${last_at}`, last_model: 'm', last_outcome: 'ok',
});

describe('lastSeen', () => {
  it('takes the most recent request among the tool user agents', () => {
    const clients = [seen('codex_exec/0.1', 5), seen('claude-cli/2.1 (external, cli)', 9), seen('codex_cli_rs/0.1', 7)];
    expect(lastSeen({ user_agents: ['codex_exec/', 'codex_cli_rs/'] }, clients)?.last_at).toBe(7);
    expect(lastSeen({ user_agents: ['claude-cli/'] }, clients)?.last_id).toBe('r9');
  });
  it('is null for a tool never seen, and matches prefixes only', () => {
    expect(lastSeen({ user_agents: ['aider/'] }, [seen('not-aider/1', 1)])).toBeNull();
  });
});
