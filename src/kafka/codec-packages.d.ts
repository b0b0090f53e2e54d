// Types of the two codec packages, which ship none: only what src/kafka/codecs.ts uses.
declare module 'kafkajs-snappy' {
  interface SnappyCodec {
    compress(encoder: { buffer: Buffer }): Promise<Buffer>;
    decompress(buffer: Buffer): Promise<Buffer>;
  }
  const createSnappyCodec: () => SnappyCodec;
  export default createSnappyCodec;
}

declare module 'lz4js' {
  /** Decodes one LZ4 block of `src` into `dst` at `dIndex`; returns the end of what it wrote. */
  export function decompressBlock(
    src: Uint8Array,
    dst: Uint8Array,
    sIndex: number,
    sLength: number,
    dIndex: number,
  ): number;
  /** One LZ4 frame holding all of `src`. */
  export function compress(src: Uint8Array, maxSize?: number): Uint8Array;
}
