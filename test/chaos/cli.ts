// `npm run chaos -- --minutes N [--seed S]`: the chaos integration test (test/integration/
// chaos.test.ts) with N minutes of reassigns and faults instead of CI's 1.5, or a seed replayed.
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';

const usage = `Usage: npm run chaos -- [--minutes N] [--seed S]

  --minutes N   minutes of reassigns and faults            [default 30]
  --seed S      the fault schedule's seed (printed by every run)  [default: a new one]
`;

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '30' },
    seed: { type: 'string' },
    help: { type: 'boolean' },
  },
});
if (values.help) {
  process.stdout.write(usage);
  process.exit(0);
}
const minutes = Number(values.minutes);
if (!(minutes > 0) || (values.seed !== undefined && !/^[0-9]+$/.test(values.seed))) {
  process.stderr.write(usage);
  process.exit(2);
}

const child = spawn(
  'npm',
  ['run', '-s', 'test:integration', '--', '--testPathPatterns', 'integration/chaos\\.'],
  {
    stdio: 'inherit',
    env: {
      ...process.env,
      STREAMCUBE_CHAOS_MINUTES: String(minutes),
      ...(values.seed ? { STREAMCUBE_CHAOS_SEED: values.seed } : {}),
    },
  },
);
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
