// What the test broker's SASL_SSL listener needs: a CA and a broker certificate made with openssl
// (SAN for 127.0.0.1, localhost and the listener's own address), a second CA that signed nothing
// the broker presents (a client trusting it fails the TLS handshake), and the users: SCRAM ones
// written into the metadata log at storage format time, PLAIN ones in the listener's JAAS config.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCommand } from './processes.ts';

export interface BrokerUser {
  username: string;
  password: string;
}

export interface KafkaAuth {
  /** `host:port` of the SASL_SSL listener. */
  bootstrap: string;
  /** PEM of the CA that signed the broker's certificate. */
  caFile: string;
  /** PEM of a CA that signed nothing the broker presents. */
  otherCaFile: string;
  /** Users by SASL mechanism (`plain`, `scram-sha-256`, `scram-sha-512`). */
  users: Record<'plain' | 'scram-sha-256' | 'scram-sha-512', BrokerUser>;
}

// Test credentials of a throwaway broker, not secrets.
export const brokerUsers: KafkaAuth['users'] = {
  plain: { username: 'plain-user', password: 'plain-pass-7f3a' },
  'scram-sha-256': { username: 'scram256-user', password: 'scram256-pass-91c2' },
  'scram-sha-512': { username: 'scram512-user', password: 'scram512-pass-4d8e' },
};

const openssl = (dir: string, args: string[]): Promise<unknown> =>
  runCommand('openssl', args, { cwd: dir });

/**
 * Makes (once) in `dir` a CA (`ca.crt`), a second CA that signs nothing (`other-ca.crt`: a client
 * trusting it must fail the handshake), and `<name>.key` / `<name>.crt`, a server certificate the
 * CA signed for `subject` with the subject alternative names `san` (`DNS:…`, `IP:…`).
 */
export async function makeServerCertificates(
  dir: string,
  o: { name: string; subject: string; san: string[] },
): Promise<{ caFile: string; otherCaFile: string; keyFile: string; certFile: string }> {
  mkdirSync(dir, { recursive: true });
  const files = {
    caFile: join(dir, 'ca.crt'),
    otherCaFile: join(dir, 'other-ca.crt'),
    keyFile: join(dir, `${o.name}.key`),
    certFile: join(dir, `${o.name}.crt`),
  };
  if (Object.values(files).every((f) => existsSync(f))) return files;
  for (const [name, subject] of [
    ['ca', '/CN=streamcube test CA'],
    ['other-ca', '/CN=streamcube untrusted test CA'],
  ] as const)
    await openssl(dir, [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '3650',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
      '-subj',
      subject,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
  // Kafka reads an unencrypted PKCS#8 key from a PEM keystore: openssl 3 writes PKCS#8.
  await openssl(dir, [
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    `${o.name}.key`,
    '-out',
    `${o.name}.csr`,
    '-subj',
    o.subject,
  ]);
  writeFileSync(
    join(dir, `${o.name}.ext`),
    `subjectAltName=${o.san.join(',')}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n`,
  );
  await openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${o.name}.csr`,
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '3650',
    '-out',
    `${o.name}.crt`,
    '-extfile',
    `${o.name}.ext`,
  ]);
  return files;
}

/** Makes (once) the CAs and the broker's key and certificate in `dir`. */
export function makeBrokerCertificates(
  dir: string,
  host: string,
): Promise<{ caFile: string; otherCaFile: string; keyFile: string; certFile: string }> {
  const san = ['DNS:localhost', 'IP:127.0.0.1', ...(host !== '127.0.0.1' ? [`IP:${host}`] : [])];
  return makeServerCertificates(dir, { name: 'broker', subject: '/CN=localhost', san });
}

/** The server.properties lines of the SASL_SSL listener (its name in listeners comes from the caller). */
export function saslSslProperties(keystoreFile: string): string[] {
  const plain = brokerUsers.plain;
  const plainUsers = `user_${plain.username}="${plain.password}"`;
  return [
    'sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512',
    `listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required ${plainUsers};`,
    'listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;',
    'listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;',
    'ssl.keystore.type=PEM',
    `ssl.keystore.location=${keystoreFile}`,
  ];
}

/** `--add-scram` arguments of `StorageTool format` for the SCRAM users. */
export function scramFormatArguments(): string[] {
  return (['scram-sha-256', 'scram-sha-512'] as const).flatMap((m) => [
    '--add-scram',
    `${m.toUpperCase()}=[name=${brokerUsers[m].username},password=${brokerUsers[m].password}]`,
  ]);
}

/** The broker's PEM keystore: its key and certificate in one file, as `ssl.keystore.location` takes. */
export function keystorePem(keyFile: string, certFile: string): string {
  return `${readFileSync(keyFile, 'utf8').trim()}\n${readFileSync(certFile, 'utf8').trim()}\n`;
}
