import './app.css';
import 'uplot/dist/uPlot.min.css';
import { mount } from 'svelte';
import App from './App.svelte';
import { connection } from './lib/connection';
import { resumeGateway } from './lib/tools';

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
      // Paused from the tray: one click resumes it and shows the dashboard.
      if ((error as { code?: string })?.code === 'paused') {
        box.dataset.state = 'paused';
        const resume = document.createElement('button');
        resume.className = 'small';
        resume.textContent = 'Resume';
        resume.onclick = () => void resumeGateway().then(() => location.reload(), (e: unknown) => {
          box.textContent = `Switchyard cannot resume: ${(e as { message?: string })?.message ?? String(e)}`;
        });
        box.append(' ', resume);
      }
      target.appendChild(box);
    },
  );
}
