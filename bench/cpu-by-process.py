#!/usr/bin/env python3
"""CPU seconds by kind of process while it runs, from /proc/<pid>/stat (utime + stime).

    python3 bench/cpu-by-process.py OUT.json [interval-s]     # stop it with SIGINT or SIGTERM

Kinds: broker (Kafka's JVM), apiserver, etcd, operator and receiver (`node … operator|receiver`;
each receiver apart, by its --id, with PER_RECEIVER=1), bench (node bench/…), node-other, and
other:<program>. A process started meanwhile counts from its start; one that ended counts up to
the last sample. Writes {"seconds": wall time, "cpu": {kind: CPU seconds}}. bench/README.md
(2026-12-06, evening) used it beside `bench:reassign` to see where two cores go.
"""
import json
import os
import signal
import sys
import time

HZ = os.sysconf('SC_CLK_TCK')


def kind(cmd):
    line = ' '.join(cmd)
    program = os.path.basename(cmd[0])
    if 'java' in program and 'kafka' in line:
        return 'broker'
    if 'kube-apiserver' in program:
        return 'apiserver'
    if 'etcd' in program:
        return 'etcd'
    if 'node' in program and 'operator' in cmd:
        return 'operator'
    if 'node' in program and 'receiver' in cmd:
        if os.environ.get('PER_RECEIVER'):
            ident = next((a.split('=', 1)[1] for a in cmd if a.startswith('--id=')), '?')
            return f'receiver {ident}'
        return 'receiver'
    if 'node' in program and 'bench/' in line:
        return 'bench'
    if 'node' in program:
        return 'node-other'
    return 'other:' + program[:20]


def snapshot():
    seen = {}
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open(f'/proc/{pid}/stat') as f:
                stat = f.read()
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                cmd = [a.decode(errors='replace') for a in f.read().split(b'\0') if a]
        except OSError:
            continue
        if not cmd:
            continue
        fields = stat[stat.rindex(')') + 2:].split()
        seen[int(pid)] = (kind(cmd), (int(fields[11]) + int(fields[12])) / HZ)
    return seen


def main():
    out = sys.argv[1]
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    first = snapshot()
    latest = dict(first)
    started = time.time()
    stopping = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.append(True))
    while not stopping:
        time.sleep(interval)
        for pid, value in snapshot().items():
            if pid not in first:
                first[pid] = (value[0], 0.0)
            latest[pid] = value
    totals = {}
    for pid, (k, cpu) in latest.items():
        totals[k] = totals.get(k, 0.0) + cpu - first[pid][1]
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])
    with open(out, 'w') as f:
        json.dump({'seconds': round(time.time() - started, 1),
                   'cpu': {k: round(v, 1) for k, v in ranked}}, f, indent=1)


if __name__ == '__main__':
    main()
