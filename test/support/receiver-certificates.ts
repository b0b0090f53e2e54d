// Certificates for receivers serving their admin API over HTTPS (made with openssl, as the test
// broker's): a CA, a receiver certificate it signed carrying the name callers check
// (streamcube-receiver), and a second CA that signed nothing a receiver presents.
import { defaultReceiverServerName } from '../../src/http/tls.ts';
import { makeServerCertificates } from '../../src/local/kafka-auth.ts';

export type ReceiverCertificates = Awaited<ReturnType<typeof makeServerCertificates>>;

/** Makes (once) the CAs and a receiver's key and certificate in `dir`. */
export function makeReceiverCertificates(
  dir: string,
  name = defaultReceiverServerName,
): Promise<ReceiverCertificates> {
  return makeServerCertificates(dir, {
    name: 'receiver',
    subject: `/CN=${name}`,
    san: [`DNS:${name}`],
  });
}
