// TLS of the receivers' admin API: the receiver serves it with a certificate from files (a mounted
// Secret, re-read so that a renewed certificate applies without a restart), and the operator and
// the query server call it trusting one CA and checking one name in the certificate, whatever pod
// IP they dial: the receivers' identity is that name, not an address.
import { readFileSync } from 'node:fs';
import type { Server as HttpsServer } from 'node:https';
import { Agent, fetch as undiciFetch } from 'undici';
import { ConfigError } from '../config-error.ts';
import { receiverSelectorError } from '../operator/discovery.ts';

/** The name receivers' certificates carry (SAN) and their callers check, unless told another. */
export const defaultReceiverServerName = 'streamcube-receiver';

function readPem(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read the ${what} ${path}: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

export interface CertificateFiles {
  certFile: string;
  keyFile: string;
}

/** The certificate and key as `https.createServer` takes them; throws ConfigError when unreadable. */
export function readCertificate(files: CertificateFiles): { cert: string; key: string } {
  return {
    cert: readPem(files.certFile, 'TLS certificate'),
    key: readPem(files.keyFile, 'TLS key'),
  };
}

/**
 * Reads the certificate files again every `pollMs` and gives `server` the new ones when they
 * changed (a renewed Secret); a read that fails keeps the current ones and is told `onError`.
 */
export function followCertificate(
  server: HttpsServer,
  files: CertificateFiles,
  options: { pollMs?: number; onError?: (error: Error) => void } = {},
): () => void {
  let current = JSON.stringify(readCertificate(files));
  const timer = setInterval(() => {
    try {
      const next = readCertificate(files);
      const text = JSON.stringify(next);
      if (text === current) return;
      server.setSecureContext(next);
      current = text;
    } catch (error) {
      options.onError?.(error as Error);
    }
  }, options.pollMs ?? 30_000);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * How the operator and the query server call receivers, from their flags: HTTPS trusting
 * `--receiver-ca-file`, or plain HTTP only when `--receiver-plain-http` says so (local use).
 */
export function receiverCallsOf(o: {
  caFile: string | undefined;
  serverName: string | undefined;
  plainHttp: boolean;
}): { receiverCaFile: string | undefined; receiverServerName: string } {
  if (o.caFile !== undefined && o.plainHttp)
    throw new ConfigError('--receiver-ca-file and --receiver-plain-http exclude each other');
  if (o.caFile === undefined && !o.plainHttp)
    throw new ConfigError(
      "receivers are called over HTTPS: give --receiver-ca-file (the CA of the receivers' certificates; STREAMCUBE_RECEIVER_CA_FILE), or --receiver-plain-http (STREAMCUBE_RECEIVER_PLAIN_HTTP=true) where plain HTTP is acceptable, such as one machine",
    );
  return {
    receiverCaFile: o.caFile,
    receiverServerName: o.serverName ?? defaultReceiverServerName,
  };
}

/**
 * The receiver flags the operator and the query server share: `--receiver-selector`, and
 * HTTPS (`--receiver-ca-file`, `--receiver-server-name`) or `--receiver-plain-http`, each with its
 * environment variable. Throws ConfigError naming the flag.
 */
export function receiverAccessOf(
  values: Record<string, string | boolean | undefined>,
  env: NodeJS.ProcessEnv,
): {
  receiverSelector: string | undefined;
  receiverCaFile: string | undefined;
  receiverServerName: string;
} {
  const text = (k: string): string | undefined => {
    const v = values[k];
    return typeof v === 'string' ? v : undefined;
  };
  const receiverSelector =
    text('receiver-selector') ?? (env.STREAMCUBE_RECEIVER_SELECTOR || undefined);
  const selectorError =
    receiverSelector === undefined ? undefined : receiverSelectorError(receiverSelector);
  if (selectorError !== undefined) throw new ConfigError(`--receiver-selector: ${selectorError}`);
  return {
    receiverSelector,
    ...receiverCallsOf({
      caFile: text('receiver-ca-file') ?? (env.STREAMCUBE_RECEIVER_CA_FILE || undefined),
      serverName: text('receiver-server-name'),
      plainHttp:
        values['receiver-plain-http'] === true || env.STREAMCUBE_RECEIVER_PLAIN_HTTP === 'true',
    }),
  };
}

/** How a caller reaches receivers: plain HTTP, or HTTPS trusting a CA and checking a name. */
export interface ReceiverTransport {
  scheme: 'http' | 'https';
  /** The fetch receiver calls go through (the global one for plain HTTP). */
  fetch: typeof fetch;
}

export const plainReceiverTransport: ReceiverTransport = { scheme: 'http', fetch };

/**
 * HTTPS to receivers: the CA in `caFile` (re-read every `pollMs`, for a rotated CA bundle) and the
 * name every receiver's certificate must carry, checked whatever address is dialled.
 */
export function tlsReceiverTransport(
  caFile: string,
  serverName = defaultReceiverServerName,
  pollMs = 60_000,
): ReceiverTransport & { close: () => void } {
  const agentFor = (ca: string): Agent => new Agent({ connect: { ca, servername: serverName } });
  let ca = readPem(caFile, 'receiver CA file');
  let agent = agentFor(ca);
  const timer = setInterval(() => {
    try {
      const next = readFileSync(caFile, 'utf8');
      if (next === ca) return;
      const old = agent;
      ca = next;
      agent = agentFor(ca);
      void old.close();
    } catch {
      // The file is being replaced: the current CA stays until it reads whole.
    }
  }, pollMs);
  timer.unref();
  const tlsFetch = ((input: string | URL, init?: RequestInit) =>
    undiciFetch(input, {
      ...(init as Parameters<typeof undiciFetch>[1]),
      dispatcher: agent,
    })) as unknown as typeof fetch;
  return {
    scheme: 'https',
    fetch: tlsFetch,
    close: () => {
      clearInterval(timer);
      void agent.close();
    },
  };
}
