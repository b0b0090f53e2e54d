// Deep storage in an S3-compatible bucket (AWS S3, SeaweedFS, Ceph RGW, …). Credentials come from
// the SDK's default chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (a Secret in the pod's env), a
// web identity token (IRSA: AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE, set by EKS for a
// ServiceAccount annotated with a role), a profile, or the instance's role.
import {
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { faultPoint } from '../observability/fault-injection.ts';
import {
  type DeepStorage,
  type DeepStorageLocation,
  type HandOffFile,
  checkDeepStorageKey,
} from './deep-storage.ts';

type S3Location = Extract<DeepStorageLocation, { type: 's3' }>;

export class S3DeepStorage implements DeepStorage {
  readonly type = 's3';
  private readonly location: S3Location;
  private readonly client: S3Client;

  constructor(location: S3Location) {
    this.location = location;
    this.client = new S3Client({
      ...(location.endpoint ? { endpoint: location.endpoint } : {}),
      // The SDK wants a region even for a server that ignores it; AWS_REGION wins when set.
      region: location.region ?? (process.env.AWS_REGION || 'us-east-1'),
      forcePathStyle: location.forcePathStyle,
      // The hand-off scheduler retries with its own backoff and reports each failure; the SDK's
      // retries only cover a blip within one attempt.
      maxAttempts: 2,
      // CRC checksums only where S3 requires them: several S3-compatible servers refuse the
      // trailing checksums newer SDKs send by default.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // A server that accepts the connection and then hangs fails the attempt, not the receiver.
      requestHandler: { connectionTimeout: 5_000, requestTimeout: 60_000 },
    });
  }

  private objectKey(key: string, name: string): string {
    return [this.location.prefix, checkDeepStorageKey(key), name]
      .filter((part) => part !== '')
      .join('/');
  }

  locationOf(key: string): string {
    return `s3://${this.location.bucket}/${this.objectKey(key, '')}`.replace(/\/$/, '');
  }

  readManifest(key: string, signal?: AbortSignal): Promise<string | undefined> {
    return this.get(this.objectKey(key, 'manifest.json'), signal);
  }

  readObject(key: string, signal?: AbortSignal): Promise<string | undefined> {
    return this.get(this.objectKey(key, ''), signal);
  }

  readBytes(key: string, signal?: AbortSignal): Promise<Uint8Array | undefined> {
    return this.get(this.objectKey(key, ''), signal, 'bytes');
  }

  private get(objectKey: string, signal?: AbortSignal): Promise<string | undefined>;
  private get(
    objectKey: string,
    signal: AbortSignal | undefined,
    as: 'bytes',
  ): Promise<Uint8Array | undefined>;
  private async get(
    objectKey: string,
    signal?: AbortSignal,
    as: 'text' | 'bytes' = 'text',
  ): Promise<string | Uint8Array | undefined> {
    try {
      const response = await this.client.send(
        new GetObjectCommand({ Bucket: this.location.bucket, Key: objectKey }),
        signal ? { abortSignal: signal } : {},
      );
      return as === 'bytes'
        ? await response.Body?.transformToByteArray()
        : await response.Body?.transformToString('utf8');
    } catch (error) {
      if (error instanceof S3ServiceException && error.$metadata.httpStatusCode === 404)
        return undefined;
      throw describe(error, `reading s3://${this.location.bucket}/${objectKey}`);
    }
  }

  async listKeys(prefix: string, signal?: AbortSignal, startAfter?: string): Promise<string[]> {
    const base = `${this.objectKey(prefix, '')}/`;
    const keys: string[] = [];
    let token: string | undefined;
    do {
      try {
        const page = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.location.bucket,
            Prefix: base,
            ...(token ? { ContinuationToken: token } : {}),
            ...(startAfter !== undefined && !token ? { StartAfter: `${base}${startAfter}` } : {}),
          }),
          signal ? { abortSignal: signal } : {},
        );
        for (const o of page.Contents ?? []) if (o.Key) keys.push(o.Key.slice(base.length));
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } catch (error) {
        throw describe(error, `listing s3://${this.location.bucket}/${base}`);
      }
    } while (token);
    return keys;
  }

  /**
   * A conditional PUT (If-None-Match: *, S3's create-if-absent since 2024; MinIO, Ceph RGW and
   * versitygw have it too): 412 when the key exists, 409 when another conditional write of it is
   * under way. Either way this writer lost.
   */
  async createObject(key: string, body: string, signal?: AbortSignal): Promise<boolean> {
    const objectKey = this.objectKey(key, '');
    try {
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.location.bucket,
          Key: objectKey,
          Body: body,
          ContentType: 'application/json',
          IfNoneMatch: '*',
        }),
        signal ? { abortSignal: signal } : {},
      );
      return true;
    } catch (error) {
      const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata
        ?.httpStatusCode;
      if (status === 412 || status === 409) return false;
      throw describe(error, `writing s3://${this.location.bucket}/${objectKey}`);
    }
  }

  async writeHandOff(
    key: string,
    files: HandOffFile[],
    manifest: string,
    signal?: AbortSignal,
  ): Promise<void> {
    const put = async (name: string, body: Uint8Array, contentType: string): Promise<void> => {
      const objectKey = this.objectKey(key, name);
      try {
        await this.client.send(
          new PutObjectCommand({
            Bucket: this.location.bucket,
            Key: objectKey,
            Body: body,
            ContentLength: body.byteLength,
            ContentType: contentType,
          }),
          signal ? { abortSignal: signal } : {},
        );
      } catch (error) {
        throw describe(error, `writing s3://${this.location.bucket}/${objectKey}`);
      }
    };
    // Data first, the manifest last: a reader that lists manifests never meets a partial hand-off.
    for (const file of files) await put(file.name, file.body, 'application/vnd.apache.arrow.file');
    faultPoint('after-hand-off-data');
    await put('manifest.json', Buffer.from(manifest), 'application/json');
  }

  close(): void {
    this.client.destroy();
  }
}

/** The SDK's error with what was being done, keeping it as the cause. */
function describe(error: unknown, doing: string): Error {
  const e = error as Error & { $metadata?: { httpStatusCode?: number } };
  const status = e.$metadata?.httpStatusCode;
  return new Error(
    `${doing}: ${e.name}${status ? ` (HTTP ${status})` : ''}: ${e.message || 'no message'}`,
    { cause: error },
  );
}
