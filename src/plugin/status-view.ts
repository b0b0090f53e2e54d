// `kubectl streamcube status`, pure: a cube as read from the API server, as text for a person:
// its conditions, the move in flight or waiting for approval, and one row per partition (owner,
// epoch, position, lag, committed to). No I/O, unit-tested.
import type { CubeAssignment } from '../api/cube-assignment.ts';

/** Columns of `rows` padded to their widest cell, two spaces apart. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows)
    row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows
    .map((row) =>
      row
        .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** `3s`, `4m10s`, `2h5m`: how long ago `iso` was, from `now`. */
export function age(iso: string | undefined, now: Date): string {
  if (iso === undefined) return '-';
  const s = Math.max(0, Math.round((now.getTime() - Date.parse(iso)) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? `${s % 60}s` : ''}`;
  const h = Math.floor(s / 3600);
  if (h < 48) return `${h}h${Math.floor((s % 3600) / 60) ? `${Math.floor((s % 3600) / 60)}m` : ''}`;
  return `${Math.floor(h / 24)}d`;
}

/** The cube's partitions, each with its owner (status.assignment) where it has one. */
export function ownersOf(cube: CubeAssignment): Map<number, string | undefined> {
  const owners = new Map<number, string | undefined>();
  for (const [rs, partitions] of Object.entries(cube.status?.assignment ?? {}))
    for (const p of partitions) owners.set(p, rs);
  for (const row of cube.status?.partitions ?? [])
    if (!owners.has(row.partition)) owners.set(row.partition, row.replicaSet);
  return new Map([...owners].sort(([a], [b]) => a - b));
}

const approveCommand = (cube: CubeAssignment, id: string): string =>
  `kubectl streamcube approve ${cube.metadata.name} -n ${cube.metadata.namespace} --id ${id}`;

export function renderStatus(cube: CubeAssignment, now: Date): string {
  const { metadata, spec, status } = cube;
  const lines: string[] = [];
  const generation = metadata.generation ?? 0;
  const observed = status?.observedGeneration;
  lines.push(
    `CubeAssignment ${metadata.namespace}/${metadata.name}: topic ${spec.source.topic}, ${spec.pool === undefined ? `replica sets ${(spec.replicaSets ?? []).join(', ')}` : `pool ${spec.pool}`}, approval ${spec.approval ?? 'auto'}${spec.suspend ? ', SUSPENDED' : ''}`,
  );
  lines.push(
    observed === undefined
      ? `generation ${generation}: not acted on by the operator yet`
      : observed < generation
        ? `generation ${generation}: the operator has applied generation ${observed} so far`
        : `generation ${generation}: applied`,
  );
  const conditions = status?.conditions ?? [];
  if (conditions.length > 0) {
    lines.push('');
    lines.push(
      table([
        ['CONDITION', 'STATUS', 'REASON', 'SINCE', 'MESSAGE'],
        ...conditions.map((c) => [
          c.type,
          c.status,
          c.reason,
          age(c.lastTransitionTime, now),
          c.message,
        ]),
      ]),
    );
  }
  const move = status?.reassign;
  if (move) {
    lines.push('');
    lines.push(
      `A move is in flight: phase ${move.phase}, for ${age(move.phaseStartedAt ?? move.startedAt, now)} (started ${age(move.startedAt, now)} ago)${move.proposal ? `, approved proposal ${move.proposal}` : ''}.`,
    );
  }
  const proposal = status?.proposal;
  if (proposal) {
    lines.push('');
    lines.push(
      `Proposal ${proposal.id} waits for approval (for generation ${proposal.generation}, made ${age(proposal.createdAt, now)} ago): ${proposal.moves.length} partition${proposal.moves.length === 1 ? '' : 's'} would move, touching ${proposal.replicaSets.join(', ')}.`,
    );
    lines.push(
      table([
        ['PARTITION', 'FROM', 'TO', 'LAG', 'UNCOMMITTED'],
        ...proposal.moves.map((m) => [
          String(m.partition),
          m.from ?? '-',
          m.to,
          proposal.lag?.[String(m.partition)] ?? '-',
          proposal.uncommitted?.[String(m.partition)] ?? '-',
        ]),
      ]),
    );
    lines.push(
      'UNCOMMITTED: offsets read but not in deep storage yet; a failover of the source set during the move would read them again.',
    );
    lines.push(`Approve it with: ${approveCommand(cube, proposal.id)}`);
  }
  const owners = ownersOf(cube);
  lines.push('');
  if (owners.size === 0) {
    lines.push('No partition is placed yet.');
  } else {
    const rows = new Map((status?.partitions ?? []).map((r) => [r.partition, r]));
    lines.push(
      table([
        [
          'PARTITION',
          'OWNER',
          'EPOCH',
          'POSITION',
          'HIGH-WATERMARK',
          'LAG',
          'COMMITTED-TO',
          'LOST',
        ],
        ...[...owners].map(([p, owner]) => {
          const row = rows.get(p);
          return [
            String(p),
            owner ?? '-',
            String(status?.epochs?.[String(p)] ?? '-'),
            row?.position ?? '-',
            row?.highWatermark ?? '-',
            row?.lag ?? '-',
            row?.handedOffTo ?? '-',
            row?.lostOffsets ?? '-',
          ];
        }),
      ]),
    );
    if (status?.totalLag !== undefined) lines.push(`Total lag: ${status.totalLag} records.`);
  }
  const segments = status?.segments;
  if (segments)
    lines.push(
      `Segments on one replica of each set: ${segments.active} active, ${segments.immutable} sealed not handed off, ${segments.handedOff} handed off.`,
    );
  return `${lines.join('\n')}\n`;
}
