// A real Kubernetes control plane without containers, as envtest runs one: etcd and
// kube-apiserver built from the Go module proxy (wrapper module in ./controlplane), started on
// loopback with TLS, RBAC authorization, a token-file admin and service-account signing keys.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { settings } from './settings.ts';
import { step } from './progress.ts';
import {
  recordedPorts,
  runCommand,
  startService,
  stopService,
  waitForService,
} from './processes.ts';

export interface ControlPlane {
  version: string;
  server: string;
  kubeconfig: string;
  /** PEM of the CA that signed the API server's serving certificate. */
  caFile: string;
  adminToken: string;
  etcd: { pid: number; logFile: string; url: string };
  apiserver: { pid: number; logFile: string };
}

export interface ControlPlaneBinaries {
  etcd: string;
  kubeApiserver: string;
  kubectl: string;
}

/** Directory holding etcd, kube-apiserver and kubectl for the pinned versions. */
export function binDir(): string {
  return join(
    settings.cacheDir,
    'bin',
    `k8s-${settings.kubernetesVersion}-etcd-${settings.etcdVersion}`,
  );
}

/** `-ldflags` that stamp the pinned Kubernetes (and etcd) version into binaries of the wrapper module. */
export function kubernetesLdflags(version = settings.kubernetesVersion): string {
  const [major, minor] = version.replace(/^v/, '').split('.');
  return [
    '-s -w',
    `-X k8s.io/component-base/version.gitVersion=${version}`,
    `-X k8s.io/component-base/version.gitMajor=${major}`,
    `-X k8s.io/component-base/version.gitMinor=${minor}`,
    `-X k8s.io/client-go/pkg/version.gitVersion=${version}`,
    `-X k8s.io/client-go/pkg/version.gitMajor=${major}`,
    `-X k8s.io/client-go/pkg/version.gitMinor=${minor}`,
    '-X go.etcd.io/etcd/api/v3/version.GitSHA=streamcube-testenv',
  ].join(' ');
}

/**
 * Runs `go build -v` (or `go install -v`) with a progress step: `go -v` names each package as it
 * is compiled or downloaded, which is the heartbeat of a build that takes minutes.
 */
export async function goBuild(
  title: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv },
): Promise<void> {
  let compiled = 0;
  await step(title, (heartbeat) =>
    runCommand('go', [...args.slice(0, 1), '-v', ...args.slice(1)], {
      cwd: options.cwd,
      env: { ...process.env, CGO_ENABLED: '0', ...options.env },
      onLine: (line) => {
        compiled += 1;
        heartbeat(`${compiled} packages compiled, last ${line.trim()}`);
      },
    }),
  );
}

/** Builds one binary of the wrapper module into `dir` (atomically: a half-built file never counts). */
export async function buildFromWrapperModule(
  dir: string,
  name: string,
  pkg: string,
  version: string,
): Promise<void> {
  mkdirSync(dir, { recursive: true });
  await goBuild(
    `building ${name} (${version}) with Go; the first build takes several minutes`,
    ['build', '-trimpath', '-ldflags', kubernetesLdflags(), '-o', join(dir, `${name}.tmp`), pkg],
    { cwd: settings.controlPlaneModule, env: { GOFLAGS: '-mod=readonly' } },
  );
  renameSync(join(dir, `${name}.tmp`), join(dir, name));
}

/** Builds (once per version) etcd, kube-apiserver and kubectl from the Go module proxy. */
export async function ensureControlPlaneBinaries(): Promise<ControlPlaneBinaries> {
  const dir = binDir();
  const bins = {
    etcd: join(dir, 'etcd'),
    kubeApiserver: join(dir, 'kube-apiserver'),
    kubectl: join(dir, 'kubectl'),
  };
  const targets: [string, string, string][] = [
    ['etcd', 'go.etcd.io/etcd/server/v3', settings.etcdVersion],
    ['kube-apiserver', 'k8s.io/kubernetes/cmd/kube-apiserver', settings.kubernetesVersion],
    ['kubectl', 'k8s.io/kubernetes/cmd/kubectl', settings.kubernetesVersion],
  ];
  for (const [name, pkg, version] of targets) {
    if (!existsSync(join(dir, name))) await buildFromWrapperModule(dir, name, pkg, version);
  }
  return bins;
}

/** Builds helm (once per version) from the Go module proxy, for the e2e suites. */
export async function ensureHelm(): Promise<string> {
  const dir = join(settings.cacheDir, 'bin', `helm-${settings.helmVersion}`);
  const helm = join(dir, 'helm');
  if (existsSync(helm)) return helm;
  mkdirSync(dir, { recursive: true });
  await goBuild(
    `building helm ${settings.helmVersion} with Go`,
    [
      'install',
      '-trimpath',
      '-ldflags',
      `-s -w -X helm.sh/helm/v3/internal/version.version=${settings.helmVersion}`,
      `helm.sh/helm/v3/cmd/helm@${settings.helmVersion}`,
    ],
    { env: { GOBIN: dir } },
  );
  return helm;
}

export interface PrometheusBinaries {
  prometheus: string;
  promtool: string;
}

/**
 * Builds prometheus and promtool (once per version) from the Go module proxy, for the suite that
 * checks the chart's alerts and dashboard; several minutes on 2 cores. Without the web UI (its
 * assets are not in the module), which the suite does not need: the HTTP API is all there.
 */
export async function ensurePrometheus(): Promise<PrometheusBinaries> {
  const version = settings.prometheusVersion;
  const dir = join(settings.cacheDir, 'bin', `prometheus-${version}`);
  const bins = { prometheus: join(dir, 'prometheus'), promtool: join(dir, 'promtool') };
  if (existsSync(bins.prometheus) && existsSync(bins.promtool)) return bins;
  // Into a directory of its own first: a build cut short leaves no binary that counts.
  const building = `${dir}.building-${process.pid}`;
  mkdirSync(building, { recursive: true });
  // 0.316.0 -> 3.16.0, the release the module version stands for.
  const release = version.replace(/^v0\.3(\d\d)\.(\d+)$/, (_, minor: string, patch: string) =>
    [3, Number(minor), patch].join('.'),
  );
  await goBuild(
    `building prometheus and promtool ${version} with Go; the first build takes several minutes`,
    [
      'install',
      '-trimpath',
      '-ldflags',
      `-s -w -X github.com/prometheus/common/version.Version=${release}`,
      `github.com/prometheus/prometheus/cmd/prometheus@${version}`,
      `github.com/prometheus/prometheus/cmd/promtool@${version}`,
    ],
    { env: { GOBIN: building } },
  );
  mkdirSync(dir, { recursive: true });
  renameSync(join(building, 'promtool'), bins.promtool);
  renameSync(join(building, 'prometheus'), bins.prometheus);
  rmSync(building, { recursive: true, force: true });
  return bins;
}

async function openssl(args: string[], cwd: string): Promise<void> {
  await runCommand('openssl', args, { cwd });
}

interface CertificateFiles {
  ca: string;
  cert: string;
  key: string;
  saKey: string;
  saPub: string;
  kubeletClientCert: string;
  kubeletClientKey: string;
}

/**
 * A CA, a serving certificate for 127.0.0.1/localhost (and `extraAddresses`), a client certificate
 * the API server shows kubelets, and service-account signing keys.
 */
async function writeCertificates(dir: string, extraAddresses: string[]): Promise<CertificateFiles> {
  mkdirSync(dir, { recursive: true });
  const days = '3650';
  await openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      days,
      '-subj',
      '/CN=streamcube-testenv-ca',
    ],
    dir,
  );
  writeFileSync(
    join(dir, 'san.ext'),
    `subjectAltName=${['IP:127.0.0.1', ...extraAddresses.map((a) => `IP:${a}`)].join(',')},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n`,
  );
  await signedCertificate(dir, 'apiserver', '/CN=kube-apiserver', 'san.ext');
  await signedCertificate(
    dir,
    'kubelet-client',
    '/O=system:masters/CN=kube-apiserver-kubelet-client',
  );
  const sa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  writeFileSync(join(dir, 'sa.key'), sa.privateKey.export({ type: 'pkcs8', format: 'pem' }));
  writeFileSync(join(dir, 'sa.pub'), sa.publicKey.export({ type: 'spki', format: 'pem' }));
  return {
    ca: join(dir, 'ca.crt'),
    cert: join(dir, 'apiserver.crt'),
    key: join(dir, 'apiserver.key'),
    saKey: join(dir, 'sa.key'),
    saPub: join(dir, 'sa.pub'),
    kubeletClientCert: join(dir, 'kubelet-client.crt'),
    kubeletClientKey: join(dir, 'kubelet-client.key'),
  };
}

/** A key and a certificate signed by the CA in `dir` for `subject` (extensions from `extfile`). */
async function signedCertificate(
  dir: string,
  name: string,
  subject: string,
  extfile?: string,
): Promise<void> {
  const key = ['-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`];
  await openssl(['req', ...key, '-out', `${name}.csr`, '-subj', subject], dir);
  const ca = ['-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial'];
  const ext = extfile ? ['-extfile', extfile] : [];
  await openssl(
    ['x509', '-req', '-in', `${name}.csr`, ...ca, '-out', `${name}.crt`, '-days', '3650', ...ext],
    dir,
  );
}

/** GET against the API server as the admin; resolves with status and body. */
export function apiGet(
  plane: Pick<ControlPlane, 'server' | 'adminToken'> & { ca: Buffer | string },
  path: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolvePromise, reject) => {
    const req = request(
      `${plane.server}${path}`,
      { ca: plane.ca, headers: { authorization: `Bearer ${plane.adminToken}` }, timeout: 5000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)));
    req.end();
  });
}

function etcdHealthy(url: string): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const req = httpRequest(`${url}/health`, { timeout: 2000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () =>
        resolvePromise(res.statusCode === 200 && body.includes('"health":"true"')),
      );
    });
    req.on('error', () => resolvePromise(false));
    req.end();
  });
}

function kubeconfigYaml(server: string, caFile: string, token: string): string {
  return `apiVersion: v1
kind: Config
clusters:
  - name: streamcube-testenv
    cluster:
      server: ${server}
      certificate-authority: ${caFile}
users:
  - name: admin
    user:
      token: ${token}
contexts:
  - name: streamcube-testenv
    context:
      cluster: streamcube-testenv
      user: admin
      namespace: default
current-context: streamcube-testenv
`;
}

export interface ControlPlaneOptions {
  /** Where the API server listens and what it advertises (the `kubernetes` Service's endpoint). */
  address?: string;
  serviceCidr?: string;
  /** ClusterIP of the `kubernetes` Service (first address of serviceCidr), put in the certificate. */
  kubernetesServiceAddress?: string;
  /**
   * Admit pods through the ServiceAccount plugin (token volumes). Off without a node: the tests'
   * process "pods" have no service account, and no controller-manager makes the default ones.
   */
  serviceAccountAdmission?: boolean;
}

/** Starts etcd and kube-apiserver under `dir`; resolves once /readyz answers ok. */
export async function startControlPlane(
  dir: string,
  options: ControlPlaneOptions = {},
): Promise<ControlPlane> {
  const address = options.address ?? '127.0.0.1';
  const bins = await ensureControlPlaneBinaries();
  mkdirSync(dir, { recursive: true });
  const extraAddresses = [options.address, options.kubernetesServiceAddress].filter(
    (a): a is string => a !== undefined && a !== '127.0.0.1',
  );
  const certs = await writeCertificates(join(dir, 'certs'), extraAddresses);
  const ports = await recordedPorts(join(dir, 'ports.json'), ['etcdClient', 'etcdPeer', 'api']);
  const [etcdClient, etcdPeer, securePort] = [ports.etcdClient, ports.etcdPeer, ports.api];

  const etcdUrl = `http://127.0.0.1:${etcdClient}`;
  const etcdLog = join(dir, 'etcd.log');
  const etcdPid = startService(
    bins.etcd,
    [
      '--name=testenv',
      `--data-dir=${join(dir, 'etcd-data')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=testenv=http://127.0.0.1:${etcdPeer}`,
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ],
    etcdLog,
  );
  await waitForService(
    'etcd',
    () => etcdHealthy(etcdUrl),
    { pid: etcdPid, logFile: etcdLog },
    60_000,
  );

  const adminToken = randomBytes(24).toString('hex');
  const tokenFile = join(dir, 'tokens.csv');
  writeFileSync(tokenFile, `${adminToken},streamcube-admin,streamcube-admin,"system:masters"\n`, {
    mode: 0o600,
  });
  const server = `https://${address}:${securePort}`;
  const apiserverLog = join(dir, 'kube-apiserver.log');
  const apiserverPid = startService(
    bins.kubeApiserver,
    [
      `--etcd-servers=${etcdUrl}`,
      `--cert-dir=${join(dir, 'certs')}`,
      `--tls-cert-file=${certs.cert}`,
      `--tls-private-key-file=${certs.key}`,
      `--secure-port=${securePort}`,
      `--bind-address=${address}`,
      `--advertise-address=${address}`,
      `--service-cluster-ip-range=${options.serviceCidr ?? '10.0.0.0/24'}`,
      '--allow-privileged=true',
      ...(options.serviceAccountAdmission ? [] : ['--disable-admission-plugins=ServiceAccount']),
      `--kubelet-client-certificate=${certs.kubeletClientCert}`,
      `--kubelet-client-key=${certs.kubeletClientKey}`,
      '--kubelet-preferred-address-types=InternalIP',
      '--authorization-mode=RBAC',
      `--token-auth-file=${tokenFile}`,
      `--client-ca-file=${certs.ca}`,
      `--service-account-issuer=${server}/`,
      `--service-account-key-file=${certs.saPub}`,
      `--service-account-signing-key-file=${certs.saKey}`,
      '--v=1',
    ],
    apiserverLog,
  );
  const ca = readFileSync(certs.ca);
  try {
    await waitForService(
      `kube-apiserver ${settings.kubernetesVersion}`,
      async () => (await apiGet({ server, adminToken, ca }, '/readyz')).body === 'ok',
      { pid: apiserverPid, logFile: apiserverLog },
      120_000,
    );
  } catch (error) {
    // waitForService stopped the API server; etcd is only there for it.
    await stopService(etcdPid);
    throw error;
  }
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, kubeconfigYaml(server, certs.ca, adminToken), { mode: 0o600 });
  return {
    version: settings.kubernetesVersion,
    server,
    kubeconfig,
    caFile: certs.ca,
    adminToken,
    etcd: { pid: etcdPid, logFile: etcdLog, url: etcdUrl },
    apiserver: { pid: apiserverPid, logFile: apiserverLog },
  };
}

/**
 * Stops the API server of `kube`, waits `downMs`, and starts it again with the same command line
 * (ports, certificates, tokens and etcd unchanged), as a control-plane restart is; resolves once
 * /readyz answers ok, with the new process's pid. etcd stays up: the cluster's state is kept.
 */
export async function restartApiServer(kube: ControlPlane, downMs: number): Promise<ControlPlane> {
  // NUL-separated argv of the running process: the exact command to start again.
  const argv = readFileSync(`/proc/${kube.apiserver.pid}/cmdline`, 'utf8').split('\0');
  if (argv.at(-1) === '') argv.pop();
  const [command, ...args] = argv;
  if (!command)
    throw new Error(`cannot read the command line of kube-apiserver ${kube.apiserver.pid}`);
  await stopService(kube.apiserver.pid);
  await new Promise((resolve) => setTimeout(resolve, downMs));
  const pid = startService(command, args, kube.apiserver.logFile);
  const ca = readFileSync(kube.caFile);
  await waitForService(
    `kube-apiserver ${kube.version} (restarted)`,
    async () =>
      (await apiGet({ server: kube.server, adminToken: kube.adminToken, ca }, '/readyz')).body ===
      'ok',
    { pid, logFile: kube.apiserver.logFile },
    120_000,
  );
  return { ...kube, apiserver: { ...kube.apiserver, pid } };
}
