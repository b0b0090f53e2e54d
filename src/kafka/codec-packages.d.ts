// Types of the two codec packages, which ship none: only what src/kafka uses of them.
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
}

declare module 'lz4js/xxh32.js' {
  /** xxHash32 of src[index, index + length). */
  export function hash(seed: number, src: Uint8Array, index: number, length: number): number;
}
