#!/usr/bin/env node
// `kubectl streamcube`: the kubectl plugin for CubeAssignments. kubectl runs any `kubectl-<name>`
// executable on the PATH as `kubectl <name>`; the package installs this file as
// `kubectl-streamcube`. It talks to the API server as kubectl does (the kubeconfig, its context and
// namespace), never to receivers, and writes only what a user would with kubectl: the spec, and
// the approval and reset annotations.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ApiException, CoreV1Api, KubeConfig, Watch } from '@kubernetes/client-node';
import { load as loadYaml } from 'js-yaml';
import {
  approveAnnotation,
  group,
  kind,
  plural,
  version as apiVersion,
  type CubeAssignment,
} from '../api/cube-assignment.ts';
import { resetAnnotation } from '../api/offset-reset.ts';
import { cubeApi, type CubeApi } from '../kubernetes/cube-api.ts';
import { isPodReady, receiverLabelSelector, replicaSetLabel } from '../operator/discovery.ts';
import { parseDuration } from '../api/duration.ts';
import { version } from '../version.ts';
import { renderStatus } from './status-view.ts';
import { parseManifestSpec, previewPlan, renderPlan } from './plan-preview.ts';
import { precheckReset, resetRequestOf } from './reset-request.ts';

export const pluginUsage = `Usage: kubectl streamcube <command> [options]

Commands:
  status NAME              the cube's conditions, its move in flight or waiting for approval, and
                           per partition: owner, epoch, position, lag, committed to
  plan -f FILE             what applying a CubeAssignment manifest would change and move, computed
                           against the live cluster; nothing is applied (FILE - reads stdin)
  approve NAME             approve the move waiting for approval (spec.approval: manual)
  reset-offsets NAME       restart partitions at other offsets: --to-earliest, --to-latest,
                           --to-datetime ISO or --to-offset P=O[,P=O]; --partitions 0,1 (default
                           all); waits for the operator to accept or refuse it
  suspend NAME             pause the cube's consumption (spec.suspend: true)
  resume NAME              resume it (spec.suspend: false)
  query NAME [options]     ask the query service (streamcube query: --server, --token-file, …)
  version                  print the plugin's version

Options:
  -n, --namespace NS       the cube's namespace [default: the context's, else default]
  --context NAME           the kubeconfig context to use
  --kubeconfig FILE        the kubeconfig [default: $KUBECONFIG, else ~/.kube/config]
  -o, --output FORMAT      status: text (default) or json
  --id ID                  approve: the proposal's id; refused when another one waits.
                           reset-offsets: the request's id [default: reset-<time>]
  --wait                   approve, reset-offsets, suspend, resume: wait until the cube has
                           settled, showing
                           each phase of the move
  --timeout DURATION       how long --wait waits [default 10m]
  --receiver-namespace NS  plan: where the receiver pods are [default: the cube's namespace]
  --receiver-selector SEL  plan: their extra label requirements (key=value,…), as the operator's
  -h, --help               show this help
`;

export interface PluginIo {
  out: (text: string) => void;
  err: (text: string) => void;
  /** Standard input, for `plan -f -`. */
  stdin?: () => string;
}

/** An error a user can act on: printed as `error: …`, exit code 1; nothing was changed. */
class PluginError extends Error {}

const options = {
  namespace: { type: 'string', short: 'n' },
  context: { type: 'string' },
  kubeconfig: { type: 'string' },
  output: { type: 'string', short: 'o' },
  filename: { type: 'string', short: 'f' },
  id: { type: 'string' },
  wait: { type: 'boolean' },
  timeout: { type: 'string' },
  'receiver-namespace': { type: 'string' },
  'receiver-selector': { type: 'string' },
  'to-earliest': { type: 'boolean' },
  'to-latest': { type: 'boolean' },
  'to-datetime': { type: 'string' },
  'to-offset': { type: 'string' },
  partitions: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

function kubeConfigOf(values: { kubeconfig?: string; context?: string }): KubeConfig {
  const kc = new KubeConfig();
  if (values.kubeconfig) kc.loadFromFile(values.kubeconfig);
  else kc.loadFromDefault();
  if (values.context) {
    if (!kc.getContexts().some((c) => c.name === values.context))
      throw new PluginError(`context "${values.context}" is not in the kubeconfig`);
    kc.setCurrentContext(values.context);
  }
  return kc;
}

const contextNamespace = (kc: KubeConfig): string | undefined =>
  kc.getContextObject(kc.getCurrentContext())?.namespace;

function durationMs(text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined)
    throw new PluginError(`--timeout must be a duration such as 90s or 10m, got '${text}'`);
  return ms;
}

/** The cube, or a PluginError naming it when it does not exist. */
async function getCube(api: CubeApi, namespace: string, name: string): Promise<CubeAssignment> {
  try {
    return await api.get(namespace, name);
  } catch (error) {
    if (error instanceof ApiException && error.code === 404)
      throw new PluginError(
        `cubeassignment "${name}" not found in namespace "${namespace}" (kubectl get cube -n ${namespace} lists them)`,
      );
    throw error;
  }
}

/**
 * Follows the cube (a watch, so that no phase the operator writes is missed) until `settled`
 * holds, printing each new phase of a move and each change of its Progressing condition. Throws
 * with where it was when `timeoutMs` passes. A watch the API server ends is resumed from the last
 * version seen; one it can no longer resume (410) starts again from a fresh read.
 */
async function waitUntil(
  kc: KubeConfig,
  namespace: string,
  name: string,
  what: string,
  settled: (c: CubeAssignment) => boolean,
  timeoutMs: number,
  io: PluginIo,
): Promise<CubeAssignment> {
  const api = cubeApi(kc);
  let said = '';
  const see = (cube: CubeAssignment): boolean => {
    const progressing = cube.status?.conditions?.find((c) => c.type === 'Progressing');
    const now = cube.status?.reassign
      ? `move: phase ${cube.status.reassign.phase}`
      : `Progressing ${progressing?.status ?? 'Unknown'} (${progressing?.reason ?? 'not reported yet'})`;
    if (now !== said) io.out(`  ${now}\n`);
    said = now;
    return settled(cube);
  };
  const first = await getCube(api, namespace, name);
  if (see(first)) return first;
  return new Promise((resolve, reject) => {
    let request: { abort: () => void } | undefined;
    let finished = false;
    let lastVersion = first.metadata.resourceVersion;
    const finish = (error: Error | undefined, cube?: CubeAssignment) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      request?.abort();
      if (error) reject(error);
      else resolve(cube!);
    };
    const timer = setTimeout(
      () =>
        finish(
          new PluginError(
            `gave up waiting for ${what} after --timeout; the cube is at: ${said.trim()}. kubectl streamcube status ${name} -n ${namespace} shows why`,
          ),
        ),
      timeoutMs,
    );
    const follow = async (): Promise<void> => {
      if (lastVersion === undefined) {
        const cube = await getCube(api, namespace, name);
        if (see(cube)) return finish(undefined, cube);
        lastVersion = cube.metadata.resourceVersion;
      }
      request = await new Watch(kc).watch(
        `/apis/${group}/${apiVersion}/namespaces/${namespace}/${plural}`,
        { fieldSelector: `metadata.name=${name}`, resourceVersion: lastVersion },
        (type: string, object: unknown) => {
          if (type === 'ERROR') {
            // 410 Gone: the version is too old to resume from; read the cube afresh.
            lastVersion = undefined;
            return;
          }
          if (type === 'DELETED')
            return finish(new PluginError(`cube ${namespace}/${name} was deleted meanwhile`));
          const cube = object as CubeAssignment;
          lastVersion = cube.metadata.resourceVersion ?? lastVersion;
          if (see(cube)) finish(undefined, cube);
        },
        (error: unknown) => {
          if (finished || (error instanceof Error && error.name === 'AbortError')) return;
          // The server ended the watch (its timeout, a restart): resume shortly.
          setTimeout(
            () => void follow().catch((e: unknown) => finish(e as Error)),
            error ? 1000 : 0,
          );
        },
      );
    };
    void follow().catch((e: unknown) => finish(e as Error));
  });
}

/** The spec's generation acted on by the operator. */
const applied = (c: CubeAssignment): boolean =>
  (c.status?.observedGeneration ?? -1) >= (c.metadata.generation ?? 0);

/** Applied and at rest: no move in flight or waiting. */
const atRest = (c: CubeAssignment): boolean =>
  c.status?.reassign === undefined &&
  c.status?.proposal === undefined &&
  applied(c) &&
  c.status?.conditions?.find((x) => x.type === 'Progressing')?.status === 'False';

async function readyReplicaSets(
  kc: KubeConfig,
  namespace: string,
  selector: string | undefined,
): Promise<Set<string>> {
  const pods = await kc
    .makeApiClient(CoreV1Api)
    .listNamespacedPod({ namespace, labelSelector: receiverLabelSelector(selector) });
  const ready = new Set<string>();
  for (const pod of pods.items) {
    const rs = pod.metadata?.labels?.[replicaSetLabel];
    if (rs && isPodReady(pod)) ready.add(rs);
  }
  return ready;
}

function readManifest(file: string, io: PluginIo): Record<string, unknown> {
  let text: string;
  try {
    text =
      file === '-' ? (io.stdin ?? (() => readFileSync(0, 'utf8')))() : readFileSync(file, 'utf8');
  } catch (error) {
    throw new PluginError(`cannot read ${file}: ${(error as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = loadYaml(text);
  } catch (error) {
    throw new PluginError(`${file} is not YAML: ${(error as Error).message.split('\n')[0]}`);
  }
  if (typeof doc !== 'object' || doc === null || (doc as { kind?: unknown }).kind !== kind)
    throw new PluginError(`${file} is not a ${kind} manifest (kind: ${kind})`);
  return doc as Record<string, unknown>;
}

/**
 * Writes the reset annotation (on the version of the cube read: a request written over another
 * one in flight is refused) and waits for the operator's verdict: refused (an error, with its
 * reason), or accepted; with --wait, until it is applied.
 */
async function resetOffsets(
  kc: KubeConfig,
  api: CubeApi,
  cube: CubeAssignment,
  values: Parameters<typeof resetRequestOf>[0] & { wait?: boolean },
  timeoutMs: number,
  io: PluginIo,
): Promise<void> {
  const namespace = cube.metadata.namespace ?? 'default';
  const name = cube.metadata.name ?? '';
  const asked = resetRequestOf(values, new Date());
  if (!asked.ok) throw new PluginError(asked.message);
  const { request } = asked;
  const problem = precheckReset(cube, request);
  if (problem) throw new PluginError(`${problem}; nothing was changed`);
  try {
    await api.annotate(
      namespace,
      name,
      { [resetAnnotation]: JSON.stringify(request) },
      cube.metadata.resourceVersion,
    );
  } catch (error) {
    if (error instanceof ApiException && error.code === 409)
      throw new PluginError(
        'the cube changed while asking for the reset; nothing was asked. Run it again',
      );
    throw error;
  }
  io.out(`asked for reset ${request.id} of ${namespace}/${name}; waiting for the operator\n`);
  const recorded = (c: CubeAssignment) => c.status?.resets?.find((r) => r.id === request.id);
  const decided = await waitUntil(
    kc,
    namespace,
    name,
    `the operator to take reset ${request.id}`,
    (c) => recorded(c) !== undefined || c.status?.reassign?.reset?.id === request.id,
    timeoutMs,
    io,
  );
  const refused = recorded(decided);
  if (refused?.result === 'Refused') throw new PluginError(refused.message ?? 'refused');
  if (!values.wait) {
    io.out(
      `reset ${request.id} accepted; kubectl streamcube status ${name} -n ${namespace} follows it\n`,
    );
    return;
  }
  const done = await waitUntil(
    kc,
    namespace,
    name,
    `reset ${request.id}`,
    (c) => recorded(c) !== undefined && c.status?.reassign === undefined,
    timeoutMs,
    io,
  );
  const record = recorded(done)!;
  io.out(`done: reset ${request.id} (${record.to}) applied\n`);
  for (const p of record.partitions ?? []) {
    const [from, to] = [BigInt(p.from), BigInt(p.to)];
    const what =
      from === to ? 'unchanged' : from < to ? `${to - from} skipped` : `${from - to} re-read`;
    io.out(`  partition ${p.partition}: ${p.from} → ${p.to} (${what}), epoch ${p.epoch}\n`);
  }
}

export async function runPlugin(argv: string[], io: PluginIo): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '-h' || command === '--help' || command === 'help') {
    (command === undefined ? io.err : io.out)(pluginUsage);
    return command === undefined ? 2 : 0;
  }
  if (command === 'version') {
    io.out(`kubectl-streamcube ${version}\n`);
    return 0;
  }
  try {
    if (command === 'query') {
      const { runQueryCommand } = await import('../query/query-command.ts');
      const named = rest.some((a) => a === '-n' || a.startsWith('--namespace'));
      if (named) return await runQueryCommand(rest, io);
      const kc = kubeConfigOf({});
      return await runQueryCommand(['-n', contextNamespace(kc) ?? 'default', ...rest], io);
    }
    const { values, positionals } = parseArgs({ args: rest, options, allowPositionals: true });
    if (values.help) {
      io.out(pluginUsage);
      return 0;
    }
    const kc = kubeConfigOf(values);
    const api = cubeApi(kc);
    const name = positionals[0];
    const timeoutMs = durationMs(values.timeout ?? '10m');
    if (command === 'plan') {
      if (!values.filename) throw new PluginError('plan needs -f FILE (a CubeAssignment manifest)');
      const doc = readManifest(values.filename, io);
      const metadata = (doc.metadata ?? {}) as { name?: string; namespace?: string };
      const cubeName = metadata.name ?? name;
      if (!cubeName) throw new PluginError('the manifest has no metadata.name');
      const namespace = values.namespace ?? metadata.namespace ?? contextNamespace(kc) ?? 'default';
      const parsed = parseManifestSpec(doc.spec);
      if ('errors' in parsed)
        throw new PluginError(
          `the manifest's spec is invalid (the API server would refuse it):\n  ${parsed.errors.join('\n  ')}`,
        );
      let live: CubeAssignment | undefined;
      try {
        live = await api.get(namespace, cubeName);
      } catch (error) {
        if (!(error instanceof ApiException && error.code === 404)) throw error;
      }
      const ready = await readyReplicaSets(
        kc,
        values['receiver-namespace'] ?? namespace,
        values['receiver-selector'],
      );
      io.out(renderPlan(cubeName, namespace, previewPlan(parsed.spec, live, ready), live));
      return 0;
    }
    if (!['status', 'approve', 'reset-offsets', 'suspend', 'resume'].includes(command)) {
      io.err(`kubectl streamcube: unknown command '${command}'\n\n${pluginUsage}`);
      return 2;
    }
    if (!name)
      throw new PluginError(`${command} needs the cube's name: kubectl streamcube ${command} NAME`);
    const namespace = values.namespace ?? contextNamespace(kc) ?? 'default';
    const cube = await getCube(api, namespace, name);
    if (command === 'status') {
      if (values.output === 'json') io.out(`${JSON.stringify(cube, null, 2)}\n`);
      else if (values.output === undefined || values.output === 'text')
        io.out(renderStatus(cube, new Date()));
      else throw new PluginError(`-o must be text or json, got '${values.output}'`);
      return 0;
    }
    if (command === 'approve') {
      const proposal = cube.status?.proposal;
      if (!proposal)
        throw new PluginError(
          cube.spec.approval !== 'manual'
            ? `cube ${namespace}/${name} has spec.approval ${cube.spec.approval ?? 'auto'}: its moves start without approval, and none waits`
            : `cube ${namespace}/${name} has no proposal waiting for approval${cube.status?.reassign ? ` (a move is in flight: phase ${cube.status.reassign.phase})` : ''}`,
        );
      if (values.id !== undefined && values.id !== proposal.id)
        throw new PluginError(
          `proposal ${values.id} is not the one waiting: ${proposal.id} is (the spec changed since, or the id is mistyped). Nothing was approved; kubectl streamcube status ${name} -n ${namespace} shows it`,
        );
      try {
        // Only this version of the cube: a proposal replaced meanwhile is not approved blindly.
        await api.annotate(
          namespace,
          name,
          { [approveAnnotation]: proposal.id },
          cube.metadata.resourceVersion,
        );
      } catch (error) {
        if (error instanceof ApiException && error.code === 409)
          throw new PluginError(
            `the cube changed while approving (its proposal may have been replaced); nothing was approved. Run it again`,
          );
        throw error;
      }
      io.out(
        `approved proposal ${proposal.id}: ${proposal.moves.length} partition${proposal.moves.length === 1 ? '' : 's'} move, touching ${proposal.replicaSets.join(', ')}\n`,
      );
      if (values.wait) {
        await waitUntil(
          kc,
          namespace,
          name,
          'the move',
          (c) => c.status?.proposal?.id !== proposal.id && atRest(c),
          timeoutMs,
          io,
        );
        io.out(`done: the moves of ${proposal.id} are applied\n`);
      }
      return 0;
    }
    if (command === 'reset-offsets') {
      await resetOffsets(kc, api, cube, values, timeoutMs, io);
      return 0;
    }
    // suspend / resume
    const suspend = command === 'suspend';
    if ((cube.spec.suspend ?? false) === suspend) {
      io.out(
        `cube ${namespace}/${name} is already ${suspend ? 'suspended' : 'running (not suspended)'}\n`,
      );
      return 0;
    }
    await api.patchSpec(namespace, name, { suspend });
    io.out(
      suspend
        ? `suspended ${namespace}/${name}: its receivers pause consumption and no move starts; kubectl streamcube resume ${name} -n ${namespace} resumes it\n`
        : `resumed ${namespace}/${name}: its receivers consume again\n`,
    );
    if (values.wait) {
      await waitUntil(
        kc,
        namespace,
        name,
        suspend ? 'the suspension' : 'the resumption',
        (c) =>
          applied(c) &&
          c.status?.conditions?.find((x) => x.type === 'Ready')?.status ===
            (suspend ? 'False' : 'True'),
        timeoutMs,
        io,
      );
      io.out(`done\n`);
    }
    return 0;
  } catch (error) {
    if (
      error instanceof PluginError ||
      (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
    ) {
      io.err(`error: ${(error as Error).message}\n`);
      return 1;
    }
    if (error instanceof ApiException) {
      const body = (() => {
        try {
          return (JSON.parse(String(error.body)) as { message?: string }).message;
        } catch {
          return undefined;
        }
      })();
      io.err(`error: the API server answered ${error.code}${body ? `: ${body}` : ''}\n`);
      return 1;
    }
    io.err(`error: ${(error as Error).message}\n`);
    return 1;
  }
}

const isMain =
  process.argv[1] !== undefined &&
  (import.meta.filename === process.argv[1] || process.argv[1].endsWith('kubectl-streamcube'));
if (isMain) {
  process.exitCode = await runPlugin(process.argv.slice(2), {
    out: (t) => process.stdout.write(t),
    err: (t) => process.stderr.write(t),
  });
}
