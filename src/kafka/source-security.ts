// TLS and SASL of a cube's source: the Secrets that `spec.source.tls` and `spec.source.sasl` name,
// turned into kafkajs options, and the errors of a connection that uses them sorted into the
// reasons a user acts on (SourceAuthFailed, SourceTLSFailed). The operator and the receivers both
// read the Secrets themselves, from the CubeAssignment's namespace: no credential ever travels in
// an admin call, a log line or a status.
import type { KafkaConfig, SASLOptions } from 'kafkajs';
import type { ConnectionOptions } from 'node:tls';

export type SaslMechanismName = 'plain' | 'scram-sha-256' | 'scram-sha-512';

/** The security part of a source: Secret names only. */
export interface SourceSecurity {
  tls?: { secretRef?: string | undefined } | undefined;
  sasl?: { mechanism: SaslMechanismName; secretRef: string } | undefined;
}

/** A Secret's data, decoded: key → UTF-8 text. */
export type SecretData = Record<string, string>;

/** Reads a Secret of the namespace; undefined when it does not exist. */
export type SecretReader = (namespace: string, name: string) => Promise<SecretData | undefined>;

export class SourceSecretError extends Error {
  override name = 'SourceSecretError';
}

/** The Secret names a source refers to (for keys of client caches and for watching). */
export function securityKey(source: SourceSecurity): string {
  if (!source.tls && !source.sasl) return '';
  return JSON.stringify([source.tls?.secretRef ?? null, !!source.tls, source.sasl ?? null]);
}

/**
 * The key of a Kafka client cache: one client per broker list, and, for a secured source, per
 * namespace (where its Secrets are read) and Secret names.
 */
export function connectionKey(
  source: SourceSecurity & { brokers: readonly string[] },
  namespace: string,
): string {
  const secured = securityKey(source);
  return `${source.brokers.join(',')}${secured ? `|${namespace}|${secured}` : ''}`;
}

/** Base64-decoded `data` of a Secret as the API returns it. */
export function decodeSecretData(data: Record<string, string> | undefined): SecretData {
  return Object.fromEntries(
    Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
  );
}

/**
 * The keys of a client certificate and its key: `tls.crt`/`tls.key` (a kubernetes.io/tls Secret,
 * cert-manager), or `user.crt`/`user.key` of a Strimzi KafkaUser Secret as Strimzi writes it.
 */
function clientCertificateKeys(data: SecretData): { cert: string; key: string } {
  const strimzi = !data['tls.crt'] && !data['tls.key'] && (data['user.crt'] || data['user.key']);
  return strimzi ? { cert: 'user.crt', key: 'user.key' } : { cert: 'tls.crt', key: 'tls.key' };
}

/**
 * kafkajs's `ssl` and `sasl` options for `source`, with the Secrets read through `read`. Throws
 * SourceSecretError (naming the Secret and key, never a value) when a Secret or key is missing.
 */
export async function kafkaSecurityOptions(
  source: SourceSecurity,
  namespace: string,
  read: SecretReader,
): Promise<Pick<KafkaConfig, 'ssl' | 'sasl'>> {
  const secret = async (name: string): Promise<SecretData> => {
    const data = await read(namespace, name);
    if (!data) throw new SourceSecretError(`Secret ${namespace}/${name} does not exist`);
    return data;
  };
  const options: Pick<KafkaConfig, 'ssl' | 'sasl'> = {};
  if (source.tls) {
    const ref = source.tls.secretRef;
    if (!ref) options.ssl = true;
    else {
      const data = await secret(ref);
      const ssl: ConnectionOptions = {};
      const pair = clientCertificateKeys(data);
      // A Strimzi KafkaUser Secret's ca.crt is the clients CA, which signed the user's
      // certificate, not the brokers': trusting it would refuse every broker.
      if (data['ca.crt'] && pair.cert !== 'user.crt') ssl.ca = [data['ca.crt']];
      if (data[pair.cert] || data[pair.key]) {
        if (!data[pair.cert] || !data[pair.key])
          throw new SourceSecretError(
            `Secret ${namespace}/${ref} has only one of ${pair.cert} and ${pair.key}; mutual TLS needs both`,
          );
        ssl.cert = data[pair.cert];
        ssl.key = data[pair.key];
      }
      options.ssl = ssl;
    }
  }
  if (source.sasl) {
    const { mechanism, secretRef } = source.sasl;
    const data = await secret(secretRef);
    if (!data.password)
      throw new SourceSecretError(`Secret ${namespace}/${secretRef} has no key password`);
    // A Strimzi KafkaUser Secret holds the password only: the user is named like the Secret.
    options.sasl = {
      mechanism,
      username: data.username || secretRef,
      password: data.password,
    } as SASLOptions;
  }
  return options;
}

/**
 * A source's `ssl` and `sasl` options that follow their Secrets. kafkajs keeps the very objects it
 * was given and reads them at each new connection (tls.connect options, the SASL username and
 * password at authentication), so `refresh` reads the Secrets again and updates those objects in
 * place: the next connection — a reconnect after a broker restart, the consumer of a cube newly
 * assigned — uses what the Secrets say now, and connections already authenticated stay as they
 * are. A Secret that became unreadable or incomplete leaves the options as they were.
 */
export class LiveSourceSecurity {
  readonly options: Pick<KafkaConfig, 'ssl' | 'sasl'>;
  private readonly source: SourceSecurity;
  private readonly namespace: string;
  private readonly read: SecretReader;

  private constructor(
    source: SourceSecurity,
    namespace: string,
    read: SecretReader,
    options: Pick<KafkaConfig, 'ssl' | 'sasl'>,
  ) {
    this.source = source;
    this.namespace = namespace;
    this.read = read;
    this.options = options;
  }

  static async create(
    source: SourceSecurity,
    namespace: string,
    read: SecretReader,
  ): Promise<LiveSourceSecurity> {
    return new LiveSourceSecurity(
      source,
      namespace,
      read,
      await kafkaSecurityOptions(source, namespace, read),
    );
  }

  /** Reads the Secrets again; true when what they hold changed (and the options with it). */
  async refresh(): Promise<boolean> {
    const next = await kafkaSecurityOptions(this.source, this.namespace, this.read);
    let changed = false;
    const { ssl, sasl } = this.options;
    if (ssl && typeof ssl === 'object' && next.ssl && typeof next.ssl === 'object') {
      const current = ssl as Record<string, unknown>;
      const fresh = next.ssl as Record<string, unknown>;
      for (const key of ['ca', 'cert', 'key']) {
        if (JSON.stringify(current[key]) === JSON.stringify(fresh[key])) continue;
        changed = true;
        if (fresh[key] === undefined) delete current[key];
        else current[key] = fresh[key];
      }
    }
    if (sasl && next.sasl) {
      const current = sasl as { username: string; password: string };
      const fresh = next.sasl as { username: string; password: string };
      if (current.username !== fresh.username || current.password !== fresh.password) {
        changed = true;
        current.username = fresh.username;
        current.password = fresh.password;
      }
    }
    return changed;
  }
}

export type SourceFailureReason = 'SourceAuthFailed' | 'SourceTLSFailed';

// Node's codes of a certificate the client does not trust or that does not name the host.
const tlsCodes = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'ERR_SSL_WRONG_VERSION_NUMBER',
]);

const tlsMessages =
  /unable to verify the first certificate|self[- ]signed certificate|certificate has expired|Hostname\/IP does not match certificate|wrong version number|unable to get (local )?issuer certificate/i;

/** The errors of `error`: itself, its cause chain, and kafkajs's retry wrapper's original error. */
function errorChain(error: unknown): Record<string, unknown>[] {
  const chain: Record<string, unknown>[] = [];
  let current: unknown = error;
  while (current && typeof current === 'object' && chain.length < 10) {
    const e = current as Record<string, unknown>;
    chain.push(e);
    current = e.originalError ?? e.cause;
  }
  return chain;
}

/**
 * SourceAuthFailed for a broker refusing the credentials (kafkajs's SASL authentication error),
 * SourceTLSFailed for a certificate the client does not trust or that does not name the broker;
 * undefined for anything else (an unreachable broker stays SourceUnavailable / ConsumerFailed).
 */
export function classifySourceError(error: unknown): SourceFailureReason | undefined {
  const chain = errorChain(error);
  if (
    chain.some(
      (e) =>
        e.name === 'KafkaJSSASLAuthenticationError' ||
        (typeof e.message === 'string' && /SASL \S+( \S+)? authentication failed/.test(e.message)),
    )
  )
    return 'SourceAuthFailed';
  if (
    chain.some(
      (e) =>
        (typeof e.code === 'string' && tlsCodes.has(e.code)) ||
        (typeof e.message === 'string' && tlsMessages.test(e.message)),
    )
  )
    return 'SourceTLSFailed';
  return undefined;
}

/** `text` with every occurrence of the given secrets (passwords, keys) replaced. */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join('[redacted]');
  return out;
}

/** The values of a security config that must never be shown. */
export function secretValues(options: Pick<KafkaConfig, 'ssl' | 'sasl'>): string[] {
  const values: string[] = [];
  const sasl = options.sasl as { password?: string } | undefined;
  if (sasl?.password) values.push(sasl.password);
  const ssl = options.ssl;
  if (ssl && typeof ssl === 'object' && typeof ssl.key === 'string') values.push(ssl.key);
  return values;
}
