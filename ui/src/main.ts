import './app.css';
import 'uplot/dist/uPlot.min.css';
import { mount } from 'svelte';
import App from './App.svelte';
import { connection } from './lib/connection';

const target = document.getElementById('app');
if (target) {
  connection().then(
    (options) => mount(App, { target, props: { options } }),
    (error: unknown) => {
      // The desktop shell could not start or reach its gateway: say why, in its words.
      const box = document.createElement('div');
      box.className = 'error-box';
      box.setAttribute('role', 'alert');
      box.style.margin = '24px';
      const message = (error as { message?: string })?.message ?? String(error);
      box.textContent = `Switchyard cannot show its dashboard: ${message}`;
      target.appendChild(box);
    },
  );
}
