// `streamcube query`: its flags become the query server's request body, and an answer prints as a
// table, CSV, or says which offsets are missing and why.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  completenessNote,
  formatCsv,
  formatTable,
  parseQueryCommand,
} from '../../src/query/query-command.ts';
import { scratchDirs } from '../support/scratch-dirs.ts';

const scratch = scratchDirs();

const tokenFile = join(scratch('streamcube-query-cli-'), 'token');
writeFileSync(tokenFile, 'a-token-of-sixteen-or-more\n');

test('flags become the request body', () => {
  const c = parseQueryCommand(
    [
      '-n',
      'shop',
      '--token-file',
      tokenFile,
      '--from',
      '1767261600000',
      '--to',
      '2026-01-01T11:00:00Z',
      '--granularity',
      '1h',
      '--group-by',
      'country,device',
      '--filter',
      'country=de,fr',
      '--filter',
      'device!=web',
      '--order-by',
      'revenue:desc',
      '--limit',
      '5',
      '--require-complete',
      '-o',
      'csv',
      'orders',
    ],
    { STREAMCUBE_QUERY_SERVER: 'http://query:8082/' },
  );
  expect(c).toEqual({
    server: 'http://query:8082',
    token: 'a-token-of-sixteen-or-more',
    namespace: 'shop',
    cube: 'orders',
    output: 'csv',
    body: {
      from: 1767261600000,
      to: '2026-01-01T11:00:00Z',
      granularity: '1h',
      filters: { country: { in: ['de', 'fr'] }, device: { notIn: ['web'] } },
      groupBy: ['country', 'device'],
      orderBy: [{ field: 'revenue', direction: 'desc' }],
      limit: 5,
      requireComplete: true,
    },
  });
});

test.each([
  [['orders'], /--token-file/],
  [['--token-file', tokenFile], /name one cube/],
  [['--token-file', tokenFile, '-o', 'yaml', 'orders'], /table, json or csv/],
  [['--token-file', tokenFile, '--filter', 'country', 'orders'], /DIM=V1,V2/],
  [['--token-file', tokenFile, '--limit', '0', 'orders'], /positive integer/],
])('refused: %j', (argv, says) => {
  expect(() => parseQueryCommand(argv, {})).toThrow(says);
});

test('a table, CSV, and what is missing', () => {
  expect(
    formatTable(
      ['country', 'events'],
      [
        ['de', 1200],
        ['fr', 7],
      ],
    ),
  ).toBe('COUNTRY  EVENTS\nde         1200\nfr            7\n');
  // An exact sum is a decimal string: right-aligned as a number.
  expect(
    formatTable(
      ['country', 'revenue'],
      [
        ['de', '1200.50'],
        ['fr', '7.00'],
      ],
    ),
  ).toBe('COUNTRY  REVENUE\nde       1200.50\nfr          7.00\n');
  expect(formatCsv(['country', 'note'], [['de', 'a, "b"']])).toBe(
    'country,note\r\nde,"a, ""b"""\r\n',
  );
  expect(
    completenessNote({
      complete: false,
      partitions: [
        {
          partition: 2,
          from: '0',
          to: '90',
          covered: [['0', '40']],
          complete: false,
          missing: [{ from: '40', to: '90', reason: 'replica set rs-b has no ready receiver' }],
        },
      ],
    }),
  ).toBe(
    'INCOMPLETE: some offsets are not counted\n  partition 2: offsets from 40 to 90: replica set rs-b has no ready receiver\n',
  );
});

test('the footer counts offsets lost to retention apart: complete, in no row, and where', () => {
  const p = (partition: number, lost: [string, string][]) => ({
    partition,
    from: '0',
    to: '400',
    covered: [],
    lost: lost.map(([from, to]) => ({ from, to, reason: 'retention' as const })),
    complete: true,
    missing: [],
  });
  expect(
    completenessNote({ complete: true, partitions: [p(0, [['100', '250']]), p(1, [['5', '6']])] }),
  ).toBe(
    'complete: every offset of 2 partitions accounted for once; 151 of them lost to retention, in no row (partition 0 [100, 250), partition 1 [5, 6))\n',
  );
  expect(completenessNote({ complete: true, partitions: [p(0, [])] })).toBe(
    'complete: every offset of 1 partitions counted once\n',
  );
});

test('the footer names offsets an offset reset skipped or read again, by reset', () => {
  const p = (partition: number, resets: [string, string, string][]) => ({
    partition,
    from: '0',
    to: '900',
    covered: [],
    lost: [],
    resets: resets.map(([from, to, reason]) => ({ from, to, reason })),
    complete: true,
    missing: [],
  });
  expect(
    completenessNote({
      complete: true,
      partitions: [
        p(0, [['0', '570', 're-read after reset r-1']]),
        p(1, [['300', '340', 'skipped by reset r-2']]),
      ],
    }),
  ).toBe(
    'complete: every offset of 2 partitions accounted for once; 570 re-read after reset r-1, counted again on purpose (partition 0 [0, 570)); 40 skipped by reset r-2, in no row (partition 1 [300, 340))\n',
  );
});
