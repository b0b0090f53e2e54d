// The worker thread of a BatchParser: parses packed record values of one cube schema into columns.
import { parentPort, workerData } from 'node:worker_threads';
import type { CubeSchema } from '../api/cube.ts';
import type { PackedValues } from '../kafka/record-values.ts';
import { parseColumns, recordReader, transferablesOf } from './batch-parser.ts';

const { schema } = workerData as { schema: CubeSchema };
const reader = recordReader(schema);
const dictionaries = { strings: new Map<string, number>(), keys: new Map<string, number>() };
const port = parentPort;
if (!port) throw new Error('batch-parser-worker runs only as a worker thread');

port.on('message', (packed: PackedValues) => {
  const columns = parseColumns(schema, reader, dictionaries, packed);
  port.postMessage(columns, transferablesOf(columns));
});
