// Performance marks for each view's first paint with its data, which the
// browser test and the benchmark read: the measure `view:<name>` runs from
// the navigation that opened the view (or, on the page's first load, from
// the start of the page) to the frame after the view's data is on screen.

/** Marks that `view` was navigated to. */
export function opened(view: string): void {
  performance.mark(`open:${view}`);
}

/**
 * Measures `view:<view>` once, the first time `ready()` holds after the DOM
 * has been updated. Call it while the view's component initialises.
 */
export function firstPaint(view: string, ready: () => boolean): void {
  let done = false;
  $effect(() => {
    if (done || !ready()) return;
    done = true;
    // Effects run once the DOM is updated; the second frame after that
    // starts once the first, with the data in it, has been drawn.
    requestAnimationFrame(() => requestAnimationFrame(() => measure(view)));
  });
}

function measure(view: string): void {
  const start = performance.getEntriesByName(`open:${view}`, 'mark').length > 0 ? `open:${view}` : undefined;
  performance.measure(`view:${view}`, start === undefined ? { start: 0 } : start);
}
