// `npm run env:up | env:down | env:status`: the test environment by hand, for people and for
// running single suites against a long-lived broker and API server.
import { settings } from '../../src/local/settings.ts';
import {
  describeEnvironment,
  environmentVariables,
  findRunningEnvironment,
  recordedEnvironment,
  startEnvironment,
  stopEnvironment,
} from '../../src/local/environment.ts';
import { ensureHelm, ensurePrometheus } from '../../src/local/controlplane.ts';
import { ensureVersitygw } from './s3-server.ts';
import { resolveKafkaClasspath } from '../../src/local/kafka.ts';
import { ensureControlPlaneBinaries } from '../../src/local/controlplane.ts';
import { prepareNode } from '../../src/local/node/node.ts';

function printConnection(env: Parameters<typeof describeEnvironment>[0]): void {
  console.log(describeEnvironment(env));
  console.log('\nexport these to use it from a shell:');
  for (const [k, v] of Object.entries(environmentVariables(env))) console.log(`export ${k}=${v}`);
}

async function main(command: string | undefined, flags: Set<string>): Promise<number> {
  const running = findRunningEnvironment(settings.stateDir);
  switch (command) {
    case 'up': {
      if (running && running.kafka.version !== settings.kafkaVersion) {
        console.error(
          `an environment with Kafka ${running.kafka.version} already runs in ${settings.stateDir}; ` +
            `for ${settings.kafkaVersion} stop it first (npm run env:down) or use another STREAMCUBE_ENV_DIR`,
        );
        return 1;
      }
      if (running && flags.has('--node') && !running.node) {
        console.error(
          `an environment without a node runs in ${settings.stateDir}; stop it first (npm run env:down)`,
        );
        return 1;
      }
      if (running) {
        console.log(`already running (state in ${settings.stateDir})`);
        printConnection(running);
        return 0;
      }
      const env = await startEnvironment(settings.stateDir, { node: flags.has('--node') });
      printConnection(env);
      console.log('\nstop it with: npm run env:down');
      return 0;
    }
    case 'down': {
      // A half-dead environment is still stopped: what runs of it, and a node's host changes.
      const recorded = running ?? recordedEnvironment(settings.stateDir);
      if (!recorded) {
        console.log('no environment is running');
        return 0;
      }
      if (!running) console.log('some processes of the environment had exited; stopping the rest');
      await stopEnvironment(recorded, true);
      console.log('stopped');
      return 0;
    }
    case 'status':
      if (!running) {
        console.log('no environment is running');
        return 1;
      }
      printConnection(running);
      return 0;
    case 'install': {
      // Build and download everything, start nothing: what CI runs before the tests.
      await Promise.all([resolveKafkaClasspath(), ensureControlPlaneBinaries()]);
      await ensureHelm();
      await ensurePrometheus();
      await ensureVersitygw();
      if (flags.has('--node')) await prepareNode();
      console.log(`cached under ${settings.cacheDir}`);
      return 0;
    }
    default:
      console.error('usage: test/env/cli.ts up [--node] | down | status | install [--node]');
      return 2;
  }
}

process.exitCode = await main(process.argv[2], new Set(process.argv.slice(3)));
