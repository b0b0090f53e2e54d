// The operator's --receiver-namespace: where it finds receiver pods for the cubes of every
// namespace (the Helm chart's release namespace), from the flag or the environment; without it,
// each cube's own namespace. A value that is no namespace name fails at start, naming the flag.
// And --receiver-selector: the labels receiver pods must have too (the chart's release).
import { ConfigError } from '../../src/config-error.ts';
import { parseOperatorConfig } from '../../src/operator/config.ts';
import { receiverLabelSelector } from '../../src/operator/discovery.ts';

const required = ['--receiver-token-file=/tmp/token', '--receiver-plain-http'];

test.each([
  { name: 'neither flag nor environment: each cube’s own', args: [], env: {}, expected: undefined },
  {
    name: 'the flag',
    args: ['--receiver-namespace=streamcube'],
    env: {},
    expected: 'streamcube',
  },
  {
    name: 'the environment',
    args: [],
    env: { STREAMCUBE_RECEIVER_NAMESPACE: 'streamcube' },
    expected: 'streamcube',
  },
  {
    name: 'the flag over the environment',
    args: ['--receiver-namespace=receivers'],
    env: { STREAMCUBE_RECEIVER_NAMESPACE: 'streamcube' },
    expected: 'receivers',
  },
  {
    name: 'an empty environment variable: unset',
    args: [],
    env: { STREAMCUBE_RECEIVER_NAMESPACE: '' },
    expected: undefined,
  },
])('$name', ({ args, env, expected }) => {
  expect(parseOperatorConfig([...required, ...args], env).receiverNamespace).toBe(expected);
});

test.each(['Streamcube', 'team_a', '-a', 'a.b'])('%s is refused, naming the flag', (value) => {
  expect(() => parseOperatorConfig([...required, `--receiver-namespace=${value}`], {})).toThrow(
    ConfigError,
  );
  expect(() => parseOperatorConfig([...required, `--receiver-namespace=${value}`], {})).toThrow(
    /--receiver-namespace must be a namespace name/,
  );
});

test.each([
  ['app.kubernetes.io/instance=sc', 'app.kubernetes.io/instance=sc'],
  ['a=b,c=', 'a=b,c='],
])('--receiver-selector=%s is taken', (value, expected) => {
  expect(
    parseOperatorConfig([...required, `--receiver-selector=${value}`], {}).receiverSelector,
  ).toBe(expected);
});

test('without --receiver-selector, every pod with the replica-set label is a receiver', () => {
  expect(parseOperatorConfig(required, {}).receiverSelector).toBeUndefined();
  expect(receiverLabelSelector(undefined)).toBe('streamcube.io/replica-set');
  expect(receiverLabelSelector('app.kubernetes.io/instance=sc')).toBe(
    'streamcube.io/replica-set,app.kubernetes.io/instance=sc',
  );
});

test.each(['instance', 'a=b=c', 'a!=b', '=b', 'a=b,', 'a=(b)', 'a in (b)'])(
  '--receiver-selector=%s is refused, naming the flag',
  (value) => {
    expect(() => parseOperatorConfig([...required, `--receiver-selector=${value}`], {})).toThrow(
      /--receiver-selector: .* is not a label requirement key=value/,
    );
  },
);

test.each([
  [
    'neither a CA nor --receiver-plain-http',
    [],
    /receivers are called over HTTPS: give --receiver-ca-file/,
  ],
  ['both', ['--receiver-ca-file=/ca.crt', '--receiver-plain-http'], /exclude each other/],
])('receivers over HTTPS or, said so, plain HTTP: %s is refused', (_name, args, message) => {
  expect(() => parseOperatorConfig(['--receiver-token-file=/tmp/token', ...args], {})).toThrow(
    message,
  );
});

test('--receiver-ca-file: HTTPS, checking the name streamcube-receiver unless told another', () => {
  const base = ['--receiver-token-file=/tmp/token', '--receiver-ca-file=/ca.crt'];
  expect(parseOperatorConfig(base, {})).toMatchObject({
    receiverCaFile: '/ca.crt',
    receiverServerName: 'streamcube-receiver',
  });
  expect(parseOperatorConfig([...base, '--receiver-server-name=rx'], {}).receiverServerName).toBe(
    'rx',
  );
  expect(
    parseOperatorConfig(['--receiver-token-file=/tmp/token'], {
      STREAMCUBE_RECEIVER_PLAIN_HTTP: 'true',
    }).receiverCaFile,
  ).toBeUndefined();
});

test('--pool-configmap: the chart pool ConfigMap, from the flag or the environment; it needs --receiver-namespace, and a name', () => {
  const ns = '--receiver-namespace=streamcube';
  expect(parseOperatorConfig([...required, ns], {}).poolConfigMap).toBeUndefined();
  expect(
    parseOperatorConfig([...required, ns, '--pool-configmap=sc-receiver-pool'], {}).poolConfigMap,
  ).toBe('sc-receiver-pool');
  expect(
    parseOperatorConfig([...required, ns], { STREAMCUBE_POOL_CONFIGMAP: 'sc-receiver-pool' })
      .poolConfigMap,
  ).toBe('sc-receiver-pool');
  expect(() => parseOperatorConfig([...required, '--pool-configmap=sc-receiver-pool'], {})).toThrow(
    /--pool-configmap needs --receiver-namespace/,
  );
  expect(() => parseOperatorConfig([...required, ns, '--pool-configmap=Pool_1'], {})).toThrow(
    /--pool-configmap must be a ConfigMap name/,
  );
});
