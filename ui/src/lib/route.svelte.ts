// Hash routes (`#/requests/<id>`), so the same build works under /ui/ and
// from the desktop app's bundle without server-side routing.

import { opened } from './paint.svelte';

export const VIEWS = ['overview', 'live', 'requests', 'sessions', 'spend', 'members', 'providers', 'tools', 'settings'] as const;
export type View = (typeof VIEWS)[number] | 'login';

export interface Route {
  view: View;
  arg: string | null;
  params: URLSearchParams;
}

export function parse(hash: string): Route {
  const [path, search = ''] = hash.replace(/^#\/?/, '').split('?');
  const [view, ...rest] = path.split('/');
  const known = (VIEWS as readonly string[]).includes(view) || view === 'login';
  return {
    view: known ? (view as View) : 'overview',
    arg: rest.length ? decodeURIComponent(rest.join('/')) : null,
    params: new URLSearchParams(search),
  };
}

/** The name a route's view is timed under (`paint.svelte.ts`): an item of a view is `<view>/item`. */
export function timedAs(route: Route): string {
  return route.arg ? `${route.view}/item` : route.view;
}

export class Router {
  route = $state<Route>(parse(location.hash));

  constructor() {
    addEventListener('hashchange', () => {
      this.route = parse(location.hash);
      opened(timedAs(this.route));
    });
  }

  go(view: View, arg?: string | null): void {
    location.hash = `#/${view}${arg ? `/${encodeURIComponent(arg)}` : ''}`;
  }
}
