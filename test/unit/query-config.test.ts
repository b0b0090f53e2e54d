// The query server's flags that bound its cache: a byte count with an optional binary suffix,
// and how long a cube's listing of commit records is reused.
import { parseQueryServerConfig } from '../../src/query/config.ts';

const base = ['--receiver-token-file=/t', '--deep-storage-dir=/d', '--receiver-plain-http'];

test('defaults: a 256 MiB cache, listings reused 5 s', () => {
  expect(parseQueryServerConfig(base, {})).toMatchObject({
    cacheBytes: 256 * 2 ** 20,
    cacheListingMaxAgeMs: 5000,
  });
});

test.each([
  ['1000', 1000],
  ['64Ki', 64 * 2 ** 10],
  ['128Mi', 128 * 2 ** 20],
  ['2Gi', 2 * 2 ** 30],
  ['0', 0],
])('--cache-bytes=%s is %d bytes', (text, bytes) => {
  expect(parseQueryServerConfig([...base, `--cache-bytes=${text}`], {}).cacheBytes).toBe(bytes);
});

test.each(['lots', '1.5Mi', '-1', '64MB', ''])('--cache-bytes=%j is refused', (text) => {
  expect(() => parseQueryServerConfig([...base, `--cache-bytes=${text}`], {})).toThrow(
    /--cache-bytes must be a byte count/,
  );
});

test('--cache-listing-max-age=0s lists for every answer; a bad duration is refused', () => {
  expect(
    parseQueryServerConfig([...base, '--cache-listing-max-age=0s'], {}).cacheListingMaxAgeMs,
  ).toBe(0);
  expect(() => parseQueryServerConfig([...base, '--cache-listing-max-age=soon'], {})).toThrow(
    /--cache-listing-max-age/,
  );
});

test('--cache-full-listing-max-age: every record listed again this often, 10 minutes by default', () => {
  expect(parseQueryServerConfig(base, {}).cacheFullListingMaxAgeMs).toBe(600_000);
  expect(
    parseQueryServerConfig([...base, '--cache-full-listing-max-age=1h'], {})
      .cacheFullListingMaxAgeMs,
  ).toBe(3_600_000);
  expect(() => parseQueryServerConfig([...base, '--cache-full-listing-max-age=never'], {})).toThrow(
    /--cache-full-listing-max-age/,
  );
});
