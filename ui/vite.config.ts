import { defineConfig } from 'vitest/config';
import { svelte } from '@sveltejs/vite-plugin-svelte';

// Served by the gateway at /ui/ and from the desktop app's bundle at its
// root: asset URLs are relative, so one build works in both places.
export default defineConfig({
  base: './',
  plugins: [svelte()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false, chunkSizeWarningLimit: 300 },
  server: { proxy: { '/admin': 'http://127.0.0.1:4141', '/v1': 'http://127.0.0.1:4141' } },
  test: { include: ['src/**/*.test.ts'], environment: 'node' },
});
