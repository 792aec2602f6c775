import { describe, expect, it } from 'vitest';
import { Api, ApiError, SESSION_HEADER } from './api';

function fake(status: number, body: unknown, seen: Request[] = []): typeof fetch {
  return async (input, init) => {
    seen.push(new Request(`http://gw${input}`, init));
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    return new Response(status === 204 ? null : text, { status });
  };
}

describe('Api', () => {
  it('sends its session in a header, never a token, and builds filter queries', async () => {
    const seen: Request[] = [];
    const api = new Api({ session: 's-1', fetch: fake(200, { requests: [], next_cursor: null }, seen) });
    await api.requests({ provider: 'groq', fallback: true, model: '', limit: 50 });
    expect(seen[0].url).toBe('http://gw/admin/requests?provider=groq&fallback=true&limit=50');
    expect(seen[0].headers.get(SESSION_HEADER)).toBe('s-1');
    expect(seen[0].headers.get('authorization')).toBeNull();
  });

  it('uses the session cookie when it has no session id', async () => {
    const seen: Request[] = [];
    await new Api({ fetch: fake(200, [], seen) }).providers();
    expect(seen[0].headers.get('authorization')).toBeNull();
    expect(seen[0].headers.get(SESSION_HEADER)).toBeNull();
  });

  it('renews a lapsed session once and retries with the new one', async () => {
    const seen: Request[] = [];
    const answers = [401, 200];
    const fetcher: typeof fetch = async (input, init) => {
      seen.push(new Request(`http://gw${input}`, init));
      const status = answers.shift() ?? 200;
      return new Response(JSON.stringify(status === 401 ? { error: { code: 'admin_token_required' } } : []), { status });
    };
    let renewals = 0;
    const renew = async () => `s-${++renewals + 1}`;
    await new Api({ session: 's-1', renew, fetch: fetcher }).providers();
    expect(seen.map((r) => r.headers.get(SESSION_HEADER))).toEqual(['s-1', 's-2']);

    // Still refused after renewing: the sign-in error, no loop.
    const refused = await new Api({ session: 's-1', renew, fetch: fake(401, { error: { code: 'admin_token_required', message: 'no' } }) })
      .providers()
      .catch((e) => e);
    expect(refused.needsSignIn).toBe(true);
  });

  it('turns error bodies into ApiError with the gateway message', async () => {
    const api = new Api({ fetch: fake(422, { error: { code: 'config_invalid', message: 'routes[0].chain: no provider "x"' } }) });
    const err = await api.putRoute('m', ['x']).catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.code).toBe('config_invalid');
    expect(err.message).toContain('no provider');
  });

  it('reports sign-in and unreachable gateways in words', async () => {
    const unauth = await new Api({ fetch: fake(401, { error: { code: 'admin_token_required', message: 'sign in' } }) })
      .providers()
      .catch((e) => e);
    expect(unauth.needsSignIn).toBe(true);
    const down = await new Api({ base: 'http://127.0.0.1:1', fetch: async () => { throw new TypeError('failed'); } })
      .providers()
      .catch((e) => e);
    expect(down.code).toBe('unreachable');
    expect(down.message).toContain('http://127.0.0.1:1');
  });

  it('refuses a page that is not JSON, as from a wrong address', async () => {
    const err = await new Api({ fetch: fake(200, '<!doctype html>') }).providers().catch((e) => e);
    expect(err.code).toBe('not_json');
  });

  it('escapes names in paths and accepts empty answers', async () => {
    const seen: Request[] = [];
    await new Api({ fetch: fake(204, '', seen) }).setKey('open ai', 'a/b', 'sk-x');
    expect(seen[0].url).toBe('http://gw/admin/keys/open%20ai/a%2Fb');
    expect(await seen[0].json()).toEqual({ key: 'sk-x' });
  });
});
