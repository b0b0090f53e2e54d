// Reading a deep-storage bucket back in tests, as a reader outside the receivers would: list the
// objects, download what the manifests name, and hand the copy to pyarrow.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  CreateBucketCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3';
import type { S3TestServer } from '../env/s3-server.ts';
import { tempDir } from './scratch-dirs.ts';

export interface StoredObject {
  key: string;
  size: number;
  lastModified: Date;
}

export function s3ClientFor(server: S3TestServer): S3Client {
  return new S3Client({
    endpoint: server.endpoint,
    region: server.region,
    forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

export async function createBucket(client: S3Client, bucket: string): Promise<void> {
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
}

/** Every object under `prefix`, in key order. */
export async function listObjects(
  client: S3Client,
  bucket: string,
  prefix: string,
): Promise<StoredObject[]> {
  const out: StoredObject[] = [];
  let token: string | undefined;
  do {
    const page = await client.send(
      new ListObjectsV2Command({
        Bucket: bucket,
        Prefix: prefix,
        ...(token ? { ContinuationToken: token } : {}),
      }),
    );
    for (const o of page.Contents ?? [])
      out.push({ key: o.Key!, size: o.Size ?? 0, lastModified: o.LastModified ?? new Date(0) });
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/**
 * Downloads the hand-offs under `prefix` that have a manifest — a reader's view: data objects
 * without a manifest are not hand-offs — into a fresh directory laid out as the keys are.
 * Returns the directory (for readHandOffsWithPyarrow).
 */
export async function downloadHandOffs(
  client: S3Client,
  bucket: string,
  prefix: string,
): Promise<string> {
  const dir = tempDir('s3-download');
  const objects = await listObjects(client, bucket, prefix);
  const manifests = objects.filter((o) => o.key.endsWith('/manifest.json'));
  const download = async (o: { key: string }): Promise<void> => {
    const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: o.key }));
    const path = join(dir, o.key.slice(prefix.length));
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, await response.Body!.transformToByteArray());
  };
  // Commit records (hand-off-commit.ts) too: written whole, by one PUT each.
  for (const o of objects.filter((x) => /\/commit\.\d+\.json$/.test(x.key))) await download(o);
  for (const manifest of manifests) {
    const folder = manifest.key.slice(0, -'manifest.json'.length);
    for (const o of objects.filter(
      (x) => x.key.startsWith(folder) && !x.key.slice(folder.length).includes('/'),
    )) {
      await download(o);
    }
  }
  return dir;
}
