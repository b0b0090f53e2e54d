// Where sealed segments are handed off: a directory (local mode, a shared volume) or an
// S3-compatible bucket. A hand-off is a few data objects and a manifest, and the manifest is
// written last, so a reader that lists manifests sees whole hand-offs only.
import { ConfigError } from '../config-error.ts';

export type DeepStorageLocation =
  | { type: 'filesystem'; dir: string }
  | {
      type: 's3';
      bucket: string;
      /** Key prefix without leading or trailing '/', '' for the bucket's root. */
      prefix: string;
      /** An S3-compatible server's URL; AWS's own endpoint when absent. */
      endpoint?: string;
      /** Absent: the SDK's own (AWS_REGION, the profile), else us-east-1. */
      region?: string;
      /** `https://endpoint/bucket/key` rather than `https://bucket.endpoint/key`. */
      forcePathStyle: boolean;
    };

/** One object of a hand-off besides its manifest. */
export interface HandOffFile {
  name: string;
  body: Uint8Array;
}

export interface DeepStorage {
  readonly type: DeepStorageLocation['type'];
  /** How a hand-off's place is shown in status, logs and checkpoints (a path or an s3:// URL). */
  locationOf(key: string): string;
  /** The manifest of the hand-off at `key`, if one was written. */
  readManifest(key: string, signal?: AbortSignal): Promise<string | undefined>;
  /**
   * Writes the files, then the manifest. A failure leaves no manifest (so no hand-off a reader
   * would see); writing again over what a failed attempt left is safe.
   */
  writeHandOff(
    key: string,
    files: HandOffFile[],
    manifest: string,
    signal?: AbortSignal,
  ): Promise<void>;
  /**
   * Keys of every object under `prefix` (a hand-off key's leading parts), relative to it, in no
   * particular order. Hand-offs being written may show their files, not only whole ones. With
   * `startAfter` (relative to `prefix`), only the keys that sort after it (by their characters'
   * codes, as S3 lists ASCII keys) need be listed: a listing that resumes. It may hold more.
   */
  listKeys(prefix: string, signal?: AbortSignal, startAfter?: string): Promise<string[]>;
  /** The text of the object at `key`, if there is one. */
  readObject(key: string, signal?: AbortSignal): Promise<string | undefined>;
  /** The bytes of the object at `key` (a hand-off's data file), if there is one. */
  readBytes(key: string, signal?: AbortSignal): Promise<Uint8Array | undefined>;
  /**
   * Writes `body` at `key` only if no object is there: true when written, false when one was (a
   * compare-and-set: of two writers of one key, exactly one gets true). Whole or not at all.
   */
  createObject(key: string, body: string, signal?: AbortSignal): Promise<boolean>;
  /** Releases connections. */
  close(): void;
}

// Bucket names as S3 allows them (3–63 of a-z 0-9 . -, a letter or digit at each end).
const bucketName = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/**
 * `s3://bucket/prefix` or a directory (a plain path or `file:///path`); `flag` names where the
 * text came from in the error.
 */
/** A key naming a place outside deep storage's root (or not a place at all). */
export class DeepStorageKeyError extends Error {
  constructor(key: string, why: string) {
    super(`deep-storage key ${JSON.stringify(key.slice(0, 200))} refused: ${why}`);
    this.name = 'DeepStorageKeyError';
  }
}

/**
 * Refuses a key that could leave the storage's root: keys are `/`-separated names built from
 * validated parts, so `.` and `..` segments, empty segments, backslashes and NUL never belong to
 * one. The last line of defence under the admin API's own validation of every name.
 */
export function checkDeepStorageKey(key: string): string {
  if (key === '') return key;
  if (key.includes('\\') || key.includes('\0'))
    throw new DeepStorageKeyError(key, 'it holds a backslash or NUL');
  for (const segment of key.split('/')) {
    if (segment === '' || segment === '.' || segment === '..')
      throw new DeepStorageKeyError(key, `it holds the segment '${segment}'`);
  }
  return key;
}

export function parseDeepStorageUrl(text: string, flag: string): DeepStorageLocation {
  if (text.startsWith('file://')) return { type: 'filesystem', dir: new URL(text).pathname };
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
    if (text.trim() === '') throw new ConfigError(`${flag} must not be empty`);
    return { type: 'filesystem', dir: text };
  }
  if (!text.startsWith('s3://'))
    throw new ConfigError(
      `${flag} must be s3://bucket/prefix or a directory, got '${text}' (unknown scheme)`,
    );
  const rest = text.slice('s3://'.length);
  const slash = rest.indexOf('/');
  const bucket = slash < 0 ? rest : rest.slice(0, slash);
  const prefix = (slash < 0 ? '' : rest.slice(slash + 1)).replace(/\/+$/, '');
  if (!bucketName.test(bucket))
    throw new ConfigError(
      `${flag}: '${bucket}' is not a valid bucket name (3–63 characters of a-z, 0-9, '.', '-'), in '${text}'`,
    );
  if (prefix !== '' && prefix.split('/').some((part) => part === '' || part === '..'))
    throw new ConfigError(
      `${flag}: the prefix '${prefix}' has an empty or '..' part, in '${text}'`,
    );
  return { type: 's3', bucket, prefix, forcePathStyle: false };
}

/** The hand-off target of a location; the S3 client is loaded only when a bucket is used. */
export async function openDeepStorage(location: DeepStorageLocation): Promise<DeepStorage> {
  if (location.type === 'filesystem') {
    const { FilesystemDeepStorage } = await import('./deep-storage-filesystem.ts');
    return new FilesystemDeepStorage(location.dir);
  }
  const { S3DeepStorage } = await import('./deep-storage-s3.ts');
  return new S3DeepStorage(location);
}
