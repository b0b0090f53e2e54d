// `streamcube --version` and `streamcube_build_info` report the release package.json names.
import { readFileSync } from 'node:fs';
import { Registry } from 'prom-client';
import { registerBuildInfo } from '../../src/observability/metrics.ts';
import { version } from '../../src/version.ts';

test('the version is package.json’s, and streamcube_build_info carries it with the Node.js version', async () => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  expect(version).toBe(pkg.version);
  const registry = new Registry();
  registerBuildInfo(registry, 'operator');
  const values = (await registry.getSingleMetric('streamcube_build_info')!.get()).values;
  expect(values).toEqual([
    {
      value: 1,
      labels: {
        version: pkg.version,
        nodejs_version: process.versions.node,
        component: 'operator',
      },
    },
  ]);
});
