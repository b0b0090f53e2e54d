// Reads hand-offs in deep storage with pyarrow in a Python subprocess: an independent reader of
// the Arrow IPC files, so a test proves the files are readable by other tools, not only by us.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { AssignCubeRequest } from '../../src/protocol/admin-api.ts';
import type { HandOffManifest } from '../../src/receiver/hand-off.ts';
import type { ModelRow } from './cube-model.ts';

const run = promisify(execFile);

export interface ArrowHandOff {
  /** Directory of the hand-off, relative to the deep-storage root. */
  dir: string;
  manifest: HandOffManifest;
  /** Arrow field name → Arrow type as pyarrow prints it. */
  fields: Record<string, string>;
  /** Rows: dimension values then measures, in schema order, sorted (window_start left out). */
  rows: ModelRow[];
  /** window_start of every row, epoch milliseconds. */
  windowStarts: number[];
}

// What both readers share: one hand-off directory read into the shape of ArrowHandOff.
const readPrelude = `
import json, os, re, sys
import pyarrow as pa, pyarrow.ipc as ipc
root, columns = sys.argv[1], json.loads(sys.argv[2])
out = []
def read_handoff(path):
    with open(os.path.join(path, 'manifest.json')) as f:
        manifest = json.load(f)
    with pa.memory_map(os.path.join(path, manifest['dataFile'])) as source:
        table = ipc.open_file(source).read_all()
    out.append({
        'dir': os.path.relpath(path, root),
        'manifest': manifest,
        'fields': {f.name: str(f.type) for f in table.schema},
        'rows': [list(r) for r in zip(*[table.column(c).to_pylist() for c in columns])],
        'windowStarts': table.column('window_start').cast(pa.int64()).to_pylist(),
    })
`;

const readScript = `${readPrelude}
for dirpath, _, filenames in sorted(os.walk(root)):
    # A directory being written is <key>.tmp until its rename: not a hand-off yet.
    if 'manifest.json' in filenames and not dirpath.endswith('.tmp'):
        read_handoff(dirpath)
json.dump(out, sys.stdout)
`;

// The reader of committed data: per window and replica set, the newest commit record, and the
// hand-offs it lists; any other hand-off is a copy nobody committed.
const committedScript = `${readPrelude}
for dirpath, _, filenames in sorted(os.walk(root)):
    versions = sorted(int(m.group(1)) for m in (re.fullmatch(r'commit\\.(\\d+)\\.json', f) for f in filenames) if m)
    if not versions:
        continue
    with open(os.path.join(dirpath, 'commit.%08d.json' % versions[-1])) as f:
        record = json.load(f)
    for h in record['handOffs']:
        read_handoff(os.path.join(dirpath, h['dir']))
json.dump(out, sys.stdout)
`;

const aggregateScript = `
import json, os, sys
import pyarrow as pa, pyarrow.ipc as ipc
root, group_by, measures = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
tables = []
for dirpath, _, filenames in os.walk(root):
    if 'data.arrow' in filenames:
        with pa.memory_map(os.path.join(dirpath, 'data.arrow')) as source:
            tables.append(ipc.open_file(source).read_all())
table = pa.concat_tables(tables)
how = {'count': 'sum', 'sum': 'sum', 'min': 'min', 'max': 'max'}
grouped = table.group_by(group_by).aggregate([(m['name'], how[m['function']]) for m in measures])
names = group_by + [m['name'] + '_' + how[m['function']] for m in measures]
rows = [list(r) for r in zip(*[grouped.column(n).to_pylist() for n in names])]
json.dump(sorted(rows, key=lambda r: [str(v) for v in r[:len(group_by)]]), sys.stdout)
`;

async function python(script: string, args: string[]): Promise<unknown> {
  const { stdout } = await run('python3', ['-c', script, ...args], {
    maxBuffer: 256 * 1024 * 1024,
  });
  return JSON.parse(stdout) as unknown;
}

/** The hand-offs a script reads under `root`, each one's rows sorted by their dimensions. */
async function readWith(
  script: string,
  root: string,
  schema: AssignCubeRequest['schema'],
): Promise<ArrowHandOff[]> {
  const dims = schema.dimensions ?? [];
  const columns = [...dims, ...schema.measures.map((m) => m.name)];
  const files = (await python(script, [root, JSON.stringify(columns)])) as ArrowHandOff[];
  const key = (r: ModelRow): string => r.slice(0, dims.length).join('\u0000');
  for (const f of files) f.rows.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  return files;
}

/** Every hand-off (manifest + Arrow data) under `root`, in directory order. */
export function readHandOffsWithPyarrow(
  root: string,
  schema: AssignCubeRequest['schema'],
): Promise<ArrowHandOff[]> {
  return readWith(readScript, root, schema);
}

/**
 * The committed hand-offs under `root`: for each window and replica set, those the newest commit
 * record lists (hand-off-commit.ts), one replica's copy. What a reader of the lake should read.
 */
export function readCommittedWithPyarrow(
  root: string,
  schema: AssignCubeRequest['schema'],
): Promise<ArrowHandOff[]> {
  return readWith(committedScript, root, schema);
}

/** Every Arrow file under `root` concatenated and aggregated with pyarrow's group_by. */
export async function aggregateWithPyarrow(
  root: string,
  groupBy: string[],
  schema: AssignCubeRequest['schema'],
): Promise<ModelRow[]> {
  return (await python(aggregateScript, [
    root,
    JSON.stringify(groupBy),
    JSON.stringify(schema.measures),
  ])) as ModelRow[];
}
