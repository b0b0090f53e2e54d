// The Secrets of spec.source.tls / spec.source.sasl as kafkajs options, and kafkajs errors sorted
// into SourceAuthFailed and SourceTLSFailed.
import {
  KafkaJSConnectionError,
  KafkaJSNumberOfRetriesExceeded,
  KafkaJSSASLAuthenticationError,
} from 'kafkajs';
import {
  LiveSourceSecurity,
  type SecretData,
  SourceSecretError,
  classifySourceError,
  decodeSecretData,
  kafkaSecurityOptions,
  redact,
  secretValues,
  securityKey,
} from '../../src/kafka/source-security.ts';

const secrets: Record<string, SecretData> = {
  'ns/ca': { 'ca.crt': 'CA PEM' },
  'ns/mtls': { 'ca.crt': 'CA PEM', 'tls.crt': 'CERT PEM', 'tls.key': 'KEY PEM' },
  'ns/half': { 'tls.crt': 'CERT PEM' },
  'ns/user': { username: 'alice', password: 's3cret-pw' },
  'ns/nopass': { username: 'alice' },
  // Strimzi's Secrets as Strimzi writes them: a KafkaUser's (TLS or SCRAM) and a cluster's CA.
  'ns/tls-user': {
    'ca.crt': 'CLIENTS CA PEM',
    'user.crt': 'USER CERT PEM',
    'user.key': 'USER KEY PEM',
    'user.p12': 'P12',
    'user.password': 'p12-pw',
  },
  'ns/tls-user-half': { 'user.key': 'USER KEY PEM' },
  'ns/scram-user': { password: 'scram-pw', 'sasl.jaas.config': 'org.apache…' },
  'ns/my-cluster-cluster-ca-cert': { 'ca.crt': 'CLUSTER CA PEM', 'ca.p12': 'P12' },
};
const read = (namespace: string, name: string) => Promise.resolve(secrets[`${namespace}/${name}`]);

test('TLS with a CA Secret: ssl.ca; with tls.crt and tls.key: mutual TLS; without a Secret: the system trust store', async () => {
  expect(await kafkaSecurityOptions({ tls: { secretRef: 'ca' } }, 'ns', read)).toEqual({
    ssl: { ca: ['CA PEM'] },
  });
  expect(await kafkaSecurityOptions({ tls: { secretRef: 'mtls' } }, 'ns', read)).toEqual({
    ssl: { ca: ['CA PEM'], cert: 'CERT PEM', key: 'KEY PEM' },
  });
  expect(await kafkaSecurityOptions({ tls: {} }, 'ns', read)).toEqual({ ssl: true });
  expect(await kafkaSecurityOptions({}, 'ns', read)).toEqual({});
});

test.each(['plain', 'scram-sha-256', 'scram-sha-512'] as const)(
  'SASL %s: mechanism, username and password from the Secret',
  async (mechanism) => {
    expect(
      await kafkaSecurityOptions(
        { tls: { secretRef: 'ca' }, sasl: { mechanism, secretRef: 'user' } },
        'ns',
        read,
      ),
    ).toEqual({
      ssl: { ca: ['CA PEM'] },
      sasl: { mechanism, username: 'alice', password: 's3cret-pw' },
    });
  },
);

test("Strimzi's Secrets as they are: a KafkaUser's user.crt/user.key (its clients CA not trusted for brokers), a SCRAM user's password under the Secret's name, a cluster's CA", async () => {
  expect(await kafkaSecurityOptions({ tls: { secretRef: 'tls-user' } }, 'ns', read)).toEqual({
    ssl: { cert: 'USER CERT PEM', key: 'USER KEY PEM' },
  });
  expect(
    await kafkaSecurityOptions({ tls: { secretRef: 'my-cluster-cluster-ca-cert' } }, 'ns', read),
  ).toEqual({ ssl: { ca: ['CLUSTER CA PEM'] } });
  expect(
    await kafkaSecurityOptions(
      {
        tls: { secretRef: 'my-cluster-cluster-ca-cert' },
        sasl: { mechanism: 'scram-sha-512', secretRef: 'scram-user' },
      },
      'ns',
      read,
    ),
  ).toEqual({
    ssl: { ca: ['CLUSTER CA PEM'] },
    sasl: { mechanism: 'scram-sha-512', username: 'scram-user', password: 'scram-pw' },
  });
  // A username in the Secret still wins over its name.
  expect(
    (await kafkaSecurityOptions({ sasl: { mechanism: 'plain', secretRef: 'user' } }, 'ns', read))
      .sasl,
  ).toMatchObject({ username: 'alice' });
  await expect(
    kafkaSecurityOptions({ tls: { secretRef: 'tls-user-half' } }, 'ns', read),
  ).rejects.toThrow('Secret ns/tls-user-half has only one of user.crt and user.key');
});

test('a missing Secret or key is an error naming the Secret and key, never a value', async () => {
  await expect(
    kafkaSecurityOptions({ sasl: { mechanism: 'plain', secretRef: 'gone' } }, 'ns', read),
  ).rejects.toThrow(new SourceSecretError('Secret ns/gone does not exist'));
  await expect(
    kafkaSecurityOptions({ sasl: { mechanism: 'plain', secretRef: 'nopass' } }, 'ns', read),
  ).rejects.toThrow('Secret ns/nopass has no key password');
  await expect(kafkaSecurityOptions({ tls: { secretRef: 'half' } }, 'ns', read)).rejects.toThrow(
    /only one of tls.crt and tls.key/,
  );
});

test('the Secrets are read in the cube namespace', async () => {
  await expect(kafkaSecurityOptions({ tls: { secretRef: 'ca' } }, 'other', read)).rejects.toThrow(
    'Secret other/ca does not exist',
  );
});

test('Secret data is base64-decoded', () => {
  expect(decodeSecretData({ password: Buffer.from('pä$$').toString('base64') })).toEqual({
    password: 'pä$$',
  });
  expect(decodeSecretData(undefined)).toEqual({});
});

test('client cache keys: none for a plain source, different per Secret names', () => {
  expect(securityKey({})).toBe('');
  const a = securityKey({ sasl: { mechanism: 'plain', secretRef: 'a' } });
  expect(a).not.toBe(securityKey({ sasl: { mechanism: 'plain', secretRef: 'b' } }));
  expect(securityKey({ tls: {} })).not.toBe(securityKey({ tls: { secretRef: 'x' } }));
});

const tlsError = (code: string, message: string) => Object.assign(new Error(message), { code });

test('a refused password is SourceAuthFailed, also inside kafkajs retry wrappers or as a reported name', () => {
  // kafkajs's types declare no argument; the class takes the message as kafkajs throws it.
  const sasl = new (KafkaJSSASLAuthenticationError as unknown as new (m: string) => Error)(
    'SASL SCRAM SHA512 authentication failed: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512',
  );
  expect(classifySourceError(sasl)).toBe('SourceAuthFailed');
  expect(
    classifySourceError(
      new KafkaJSNumberOfRetriesExceeded(sasl, { retryCount: 2, retryTime: 300 }),
    ),
  ).toBe('SourceAuthFailed');
  // As a receiver reports it in its status: name and message only.
  expect(
    classifySourceError({ name: 'KafkaJSNumberOfRetriesExceeded', message: sasl.message }),
  ).toBe('SourceAuthFailed');
});

test.each([
  ['SELF_SIGNED_CERT_IN_CHAIN', 'self-signed certificate in certificate chain'],
  ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'unable to verify the first certificate'],
  ['ERR_TLS_CERT_ALTNAME_INVALID', "Hostname/IP does not match certificate's altnames"],
  ['DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate'],
  ['CERT_HAS_EXPIRED', 'certificate has expired'],
])('a TLS error %s is SourceTLSFailed', (code, message) => {
  const cause = tlsError(code, message);
  expect(classifySourceError(cause)).toBe('SourceTLSFailed');
  const connection = new KafkaJSConnectionError(`Connection error: ${message}`, {
    broker: 'b:1',
    code,
  });
  expect(classifySourceError(connection)).toBe('SourceTLSFailed');
  expect(
    classifySourceError(
      new KafkaJSNumberOfRetriesExceeded(connection, { retryCount: 0, retryTime: 1 }),
    ),
  ).toBe('SourceTLSFailed');
});

test('an unreachable broker is neither', () => {
  expect(
    classifySourceError(tlsError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:9092')),
  ).toBeUndefined();
  expect(classifySourceError(new KafkaJSConnectionError('Connection timeout'))).toBeUndefined();
  expect(classifySourceError(undefined)).toBeUndefined();
});

test('redact cuts passwords and keys out of a text', () => {
  const values = secretValues({
    sasl: { mechanism: 'plain', username: 'alice', password: 's3cret-pw' },
    ssl: { key: 'KEY PEM' },
  });
  expect(values).toEqual(['s3cret-pw', 'KEY PEM']);
  expect(redact('user alice pw s3cret-pw key KEY PEM', values)).toBe(
    'user alice pw [redacted] key [redacted]',
  );
});

test('a rotated password or certificate is written into the objects kafkajs holds; an unreadable Secret keeps them', async () => {
  const store: Record<string, SecretData> = {
    'ns/user': { username: 'alice', password: 'old-pw' },
    'ns/ca': { 'ca.crt': 'OLD CA' },
  };
  const live = await LiveSourceSecurity.create(
    { tls: { secretRef: 'ca' }, sasl: { mechanism: 'scram-sha-512', secretRef: 'user' } },
    'ns',
    (namespace, name) => Promise.resolve(store[`${namespace}/${name}`]),
  );
  const { ssl, sasl } = live.options;
  expect(await live.refresh()).toBe(false);

  store['ns/user'] = { username: 'alice', password: 'new-pw' };
  store['ns/ca'] = { 'ca.crt': 'NEW CA', 'tls.crt': 'CERT', 'tls.key': 'KEY' };
  expect(await live.refresh()).toBe(true);
  // The same objects, changed: kafkajs reads them at its next connection.
  expect(live.options.sasl).toBe(sasl);
  expect(live.options.ssl).toBe(ssl);
  expect(sasl).toMatchObject({ mechanism: 'scram-sha-512', username: 'alice', password: 'new-pw' });
  expect(ssl).toEqual({ ca: ['NEW CA'], cert: 'CERT', key: 'KEY' });

  store['ns/ca'] = { 'ca.crt': 'NEW CA' };
  expect(await live.refresh()).toBe(true);
  expect(ssl).toEqual({ ca: ['NEW CA'] });

  delete store['ns/user'];
  await expect(live.refresh()).rejects.toThrow('Secret ns/user does not exist');
  expect(sasl).toMatchObject({ password: 'new-pw' });
});
