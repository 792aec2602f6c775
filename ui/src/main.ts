import './app.css';
import 'uplot/dist/uPlot.min.css';
import { mount } from 'svelte';
import App from './App.svelte';
import { connection } from './lib/connection';

const target = document.getElementById('app');
if (target) {
  connection().then((options) => mount(App, { target, props: { options } }));
}
