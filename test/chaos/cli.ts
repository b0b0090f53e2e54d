// `npm run chaos -- --minutes N [--seed S]`: the chaos integration test (test/integration/
// chaos.test.ts) with N minutes of reassigns and faults instead of CI's 2, or a seed replayed.
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';

const usage = `Usage: npm run chaos -- [--minutes N] [--seed S]

  --minutes N   minutes of reassigns and faults            [default 30]
  --seed S      the fault schedule's seed (printed by every run)  [default: a new one]
  --receiver-kills at-rest|any-time
                at-rest: between moves, placements held back while a receiver
                (or a whole set) is down; any-time: also mid-move (moves then
                wait up to the phase timeout for the killed replica, and a set
                lost in Starting fails over within the move; see
                test/support/chaos.ts)
                                                            [default at-rest]
`;

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '30' },
    seed: { type: 'string' },
    'receiver-kills': { type: 'string', default: 'at-rest' },
    help: { type: 'boolean' },
  },
});
if (values.help) {
  process.stdout.write(usage);
  process.exit(0);
}
const minutes = Number(values.minutes);
const kills = values['receiver-kills'];
if (
  !(minutes > 0) ||
  (values.seed !== undefined && !/^[0-9]+$/.test(values.seed)) ||
  !['at-rest', 'any-time'].includes(kills)
) {
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
      STREAMCUBE_CHAOS_RECEIVER_KILLS: kills,
      ...(values.seed ? { STREAMCUBE_CHAOS_SEED: values.seed } : {}),
    },
  },
);
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
