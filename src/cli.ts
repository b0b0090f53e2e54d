#!/usr/bin/env node
// The one `streamcube` command: `operator`, `receiver`, `query-server`, `query`, and `local` (a
// whole stack on one machine).
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError } from './config-error.ts';
import { version } from './version.ts';
import { receiverUsage } from './receiver/config.ts';
import { operatorUsage } from './operator/config.ts';
import { queryServerUsage } from './query/config.ts';
import { queryUsage } from './query/query-command.ts';

export const usage = `Usage: streamcube <command> [options]

Commands:
  operator   run the Kubernetes operator that assigns cube partitions to receiver replica sets
  receiver   run a receiver: consume Kafka partitions, build time-window segments, hand them off
  query-server
             answer queries over a whole cube: live receivers and committed deep storage,
             every Kafka offset counted once
  query      ask a query server one question; a table, or -o json|csv
  local      run a whole stack on this machine (Kafka, API server, operator, receivers);
             local --node runs it with the image and the Helm chart on a real one-node cluster

Options:
  -h, --help     show this help
  -v, --version  print the version
`;

export const commands = ['operator', 'receiver', 'query-server', 'query', 'local'] as const;
export type Command = (typeof commands)[number];

export interface CliOutput {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** Runs the CLI with `argv` (without node and script) and returns the process exit code. */
export async function runCli(argv: string[], io: CliOutput): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' } },
    allowPositionals: true,
    strict: false,
  });
  const [command] = positionals;
  if (values.version) {
    io.out(`streamcube ${version}\n`);
    return 0;
  }
  if (command === 'receiver' && values.help) {
    io.out(receiverUsage);
    return 0;
  }
  if (command === 'operator' && values.help) {
    io.out(operatorUsage);
    return 0;
  }
  if (command === 'query-server' && values.help) {
    io.out(queryServerUsage);
    return 0;
  }
  if (command === 'query' && values.help) {
    io.out(queryUsage);
    return 0;
  }
  if (command === undefined || values.help) {
    (command === undefined && !values.help ? io.err : io.out)(usage);
    return command === undefined && !values.help ? 2 : 0;
  }
  if (!(commands as readonly string[]).includes(command)) {
    io.err(`streamcube: unknown command '${command}'\n\n${usage}`);
    return 2;
  }
  const rest =
    positionals.length > 1 || argv.length > 1 ? argv.slice(argv.indexOf(command) + 1) : [];
  try {
    if (command === 'operator') {
      const { runOperator } = await import('./operator/run.ts');
      return await runOperator(rest);
    }
    if (command === 'receiver') {
      const { runReceiver } = await import('./receiver/run.ts');
      return await runReceiver(rest);
    }
    if (command === 'query-server') {
      const { runQueryServer } = await import('./query/run.ts');
      return await runQueryServer(rest);
    }
    if (command === 'query') {
      const { runQueryCommand } = await import('./query/query-command.ts');
      return await runQueryCommand(rest, io);
    }
  } catch (error) {
    if (
      error instanceof ConfigError ||
      (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
    ) {
      io.err(`streamcube ${command}: ${(error as Error).message}\n`);
      return 2;
    }
    throw error;
  }
  // command === 'local': it builds etcd and kube-apiserver with Go from the wrapper module in
  // src/local/controlplane and resolves Kafka with Maven, so it runs from a source checkout.
  if (!existsSync(new URL('./local/controlplane/go.mod', import.meta.url))) {
    io.err(
      'streamcube local: runs from a source checkout: npm ci && npm run streamcube -- local\n',
    );
    return 2;
  }
  let local;
  try {
    local = parseArgs({ args: rest, options: { node: { type: 'boolean' } } });
  } catch (error) {
    io.err(`streamcube local: ${(error as Error).message}\n`);
    return 2;
  }
  const { runLocalStack } = await import('./local/stack.ts');
  return runLocalStack({ node: local.values.node === true });
}

const isMain = process.argv[1] !== undefined && import.meta.filename === process.argv[1];
if (isMain) {
  const code = await runCli(process.argv.slice(2), {
    out: (t) => process.stdout.write(t),
    err: (t) => process.stderr.write(t),
  });
  process.exitCode = code;
  // The command has finished its work (a receiver flushed, checkpointed and closed its consumers).
  // A timer or socket a client library still holds, such as kafkajs retrying a connection it began
  // while the broker was away, must not keep the process alive: a pod would wait out its whole
  // termination grace period and then be killed. Exit, and say what was still open.
  setTimeout(() => {
    process.stderr.write(
      `streamcube: exiting; still open after the command finished: ${process.getActiveResourcesInfo().join(', ')}\n`,
    );
    process.exit(code);
  }, 2_000).unref();
}
