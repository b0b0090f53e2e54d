// Where a receiver hands off: `--deep-storage s3://bucket/prefix` with the --s3-* flags, or a
// directory (`--deep-storage DIR` or the older `--deep-storage-dir`). A bad value is a config
// error naming the flag; hand-off retries back off exponentially up to --hand-off-retry-max.
import { ConfigError } from '../../src/config-error.ts';
import { parseReceiverConfig } from '../../src/receiver/config.ts';
import { handOffRetryDelay } from '../../src/receiver/hand-off-scheduler.ts';

const base = ['--replica-set=rs-a', '--data-dir=/d', '--admin-token-file=/t'];
const parse = (flags: string[], env: NodeJS.ProcessEnv = {}) =>
  parseReceiverConfig([...base, ...flags], env);

test.each([
  {
    name: 'a bucket and prefix',
    flags: ['--deep-storage=s3://lake/streamcube/segments/'],
    env: {},
    want: { type: 's3', bucket: 'lake', prefix: 'streamcube/segments', forcePathStyle: false },
  },
  {
    name: 'the bucket root, with an S3-compatible endpoint, region and path-style URLs',
    flags: [
      '--deep-storage=s3://lake',
      '--s3-endpoint=http://127.0.0.1:8333',
      '--s3-region=eu-west-1',
      '--s3-force-path-style',
    ],
    env: {},
    want: {
      type: 's3',
      bucket: 'lake',
      prefix: '',
      endpoint: 'http://127.0.0.1:8333',
      region: 'eu-west-1',
      forcePathStyle: true,
    },
  },
  {
    name: 'all from the environment, as the chart sets it',
    flags: [],
    env: {
      STREAMCUBE_DEEP_STORAGE: 's3://lake/p',
      STREAMCUBE_S3_ENDPOINT: 'https://s3.example.internal',
      STREAMCUBE_S3_FORCE_PATH_STYLE: 'true',
    },
    want: {
      type: 's3',
      bucket: 'lake',
      prefix: 'p',
      endpoint: 'https://s3.example.internal',
      forcePathStyle: true,
    },
  },
  {
    name: 'a directory through --deep-storage',
    flags: ['--deep-storage=/var/deep'],
    env: {},
    want: { type: 'filesystem', dir: '/var/deep' },
  },
  {
    name: 'a file:// URL',
    flags: ['--deep-storage=file:///var/deep'],
    env: {},
    want: { type: 'filesystem', dir: '/var/deep' },
  },
  {
    name: 'the older --deep-storage-dir',
    flags: ['--deep-storage-dir=/var/deep'],
    env: {},
    want: { type: 'filesystem', dir: '/var/deep' },
  },
])('$name', ({ flags, env, want }) => {
  expect(parse(flags, env).deepStorage).toEqual(want);
});

test.each([
  { name: 'no target', flags: [], error: /--deep-storage .*is required/ },
  {
    name: 'two targets',
    flags: ['--deep-storage=s3://lake', '--deep-storage-dir=/d'],
    error: /--deep-storage and --deep-storage-dir .*both given/,
  },
  {
    name: 'an unknown scheme',
    flags: ['--deep-storage=gs://lake/p'],
    error: /--deep-storage must be s3:\/\/bucket\/prefix or a directory, got 'gs:\/\/lake\/p'/,
  },
  {
    name: 'a bucket name S3 refuses',
    flags: ['--deep-storage=s3://My_Bucket/p'],
    error: /--deep-storage: 'My_Bucket' is not a valid bucket name/,
  },
  {
    name: 'no bucket',
    flags: ['--deep-storage=s3:///p'],
    error: /--deep-storage: '' is not a valid bucket name/,
  },
  {
    name: 'an empty part in the prefix',
    flags: ['--deep-storage=s3://lake/a//b'],
    error: /--deep-storage: the prefix 'a\/\/b' has an empty or '\.\.' part/,
  },
  {
    name: 'an endpoint that is no URL',
    flags: ['--deep-storage=s3://lake', '--s3-endpoint=127.0.0.1:8333'],
    error: /--s3-endpoint must be an http:\/\/ or https:\/\/ URL, got '127.0.0.1:8333'/,
  },
  {
    name: 'an S3 flag with a directory',
    flags: ['--deep-storage=/d', '--s3-endpoint=http://127.0.0.1:8333'],
    error: /--s3-endpoint applies to an s3:\/\/ --deep-storage only/,
  },
  {
    name: 'a region that is no region name',
    flags: ['--deep-storage=s3://lake', '--s3-region=EU West'],
    error: /--s3-region must be a region name/,
  },
  {
    name: 'a retry maximum that is no duration',
    flags: ['--deep-storage=s3://lake', '--hand-off-retry-max=soon'],
    error: /--hand-off-retry-max must be a positive duration/,
  },
])('refused: $name', ({ flags, error }) => {
  const attempt = (): unknown => parse(flags);
  expect(attempt).toThrow(ConfigError);
  expect(attempt).toThrow(error);
});

test('STREAMCUBE_S3_FORCE_PATH_STYLE takes true or false only', () => {
  expect(() =>
    parse(['--deep-storage=s3://lake'], { STREAMCUBE_S3_FORCE_PATH_STYLE: 'yes' }),
  ).toThrow(/STREAMCUBE_S3_FORCE_PATH_STYLE must be true or false, got 'yes'/);
});

test('hand-off retries wait 1 s, doubling, up to --hand-off-retry-max (default 30 s)', () => {
  const { handOffRetryMaxMs } = parse(['--deep-storage=s3://lake']);
  expect(handOffRetryMaxMs).toBe(30_000);
  const policy = { initialMs: 1_000, maxMs: handOffRetryMaxMs };
  expect([1, 2, 3, 4, 5, 6, 7, 20].map((n) => handOffRetryDelay(policy, n))).toEqual([
    1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000,
  ]);
  expect(parse(['--deep-storage=s3://lake', '--hand-off-retry-max=5s']).handOffRetryMaxMs).toBe(
    5_000,
  );
});
