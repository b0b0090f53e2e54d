# The baseline of `npm run bench:query`: pyarrow scanning the committed Arrow files the query
# service counts (the paths come from the bench, out of the committed view), for the same question,
# grouped by one dimension, timed per run. Reads a JSON spec from argv[1]; prints JSON.
import json
import sys
import time

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as fs

spec = json.load(open(sys.argv[1]))
# Many small objects: reads in flight at once, not CPU, bound a scan of a bucket.
pa.set_io_thread_count(32)
if spec['storage'] == 's3':
    s3 = spec['s3']
    filesystem = fs.S3FileSystem(
        access_key=s3['accessKeyId'],
        secret_key=s3['secretAccessKey'],
        endpoint_override=s3['endpoint'],
        scheme='http',
        region=s3['region'],
    )
else:
    filesystem = fs.LocalFileSystem()

how = {'count': 'sum', 'sum': 'sum', 'min': 'min', 'max': 'max'}
measures = spec['measures']
group_by = spec['groupBy']
columns = group_by + [m['name'] for m in measures]
times = []
rows = []
for _ in range(spec['runs']):
    started = time.perf_counter()
    # The paths are known (from the commit records): no listing, and no look-up of each file first.
    fmt = ds.IpcFileFormat()
    first = ds.dataset(spec['paths'][:1], format=fmt, filesystem=filesystem)
    dataset = ds.FileSystemDataset.from_paths(
        spec['paths'], schema=first.schema, format=fmt, filesystem=filesystem
    )
    table = dataset.to_table(columns=columns)
    grouped = table.group_by(group_by).aggregate([(m['name'], how[m['function']]) for m in measures])
    times.append((time.perf_counter() - started) * 1000)
    names = group_by + [m['name'] + '_' + how[m['function']] for m in measures]
    # A scaled sum written as integer units (a newer hand-off) is answered in its scale's digits.
    out = []
    for i in range(grouped.num_rows):
        row = [grouped.column(n)[i].as_py() for n in names]
        for j, m in enumerate(measures):
            if m.get('scale') is not None and pa.types.is_integer(grouped.column(names[len(group_by) + j]).type):
                row[len(group_by) + j] = row[len(group_by) + j] / 10 ** m['scale']
        out.append(row)
    rows = sorted(out, key=lambda r: [str(v) for v in r[: len(group_by)]])
json.dump({'ms': times, 'rows': rows, 'files': len(spec['paths']), 'tableRows': table.num_rows}, sys.stdout)
