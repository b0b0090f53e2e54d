// Where a cube lives in the receiver admin API: `/v1/namespaces/<namespace>/cubes/<cube>[/<action>]`,
// one definition for the client that builds the paths and the server that reads them. A cube is
// the pair (namespace, name), as a CubeAssignment is. The routes of before namespaces,
// `/v1/cubes/<cube>[/<action>]`, still answer, for the cube of that name in namespace `default`.

import { defaultCubeNamespace } from '../kafka/consumer-group.ts';

export { defaultCubeNamespace };

/** Who a cube is on a receiver: its CubeAssignment's namespace and name. */
export interface CubeKey {
  namespace: string;
  name: string;
}

/** `<namespace>/<name>`: one string per cube, as Kubernetes writes an object key. */
export function cubeKeyString(key: CubeKey): string {
  return `${key.namespace}/${key.name}`;
}

/** The actions a cube's path may end with (POST). */
export const cubeActions = [
  'pause',
  'resume',
  'release',
  'drain',
  'seal',
  'query',
  'fence',
] as const;
export type CubeAction = (typeof cubeActions)[number];

/** The admin path of a cube, or of one of its actions. Names are DNS labels: nothing to escape. */
export function cubePath(key: CubeKey, action?: CubeAction): string {
  const base = `/v1/namespaces/${encodeURIComponent(key.namespace)}/cubes/${encodeURIComponent(key.name)}`;
  return action === undefined ? base : `${base}/${action}`;
}

/** A path naming a cube, as read; the names are not validated yet (the server does, per field). */
export interface ParsedCubePath {
  namespace: string;
  name: string;
  /** The last segment after the cube's name, when there is one (it may name no action). */
  action: string | undefined;
  /** The route's name for metrics, with placeholders for the names. */
  route: string;
}

const namespaced = /^\/v1\/namespaces\/([^/]+)\/cubes\/([^/]+)(?:\/([^/]+))?$/;
const legacy = /^\/v1\/cubes\/([^/]+)(?:\/([^/]+))?$/;

/**
 * Reads a cube's path, or answers undefined when the path names no cube (`/v1/cubes` and
 * `/v1/status` name none; deeper paths match no route). Throws URIError on a broken %-escape.
 */
export function parseCubePath(pathname: string): ParsedCubePath | undefined {
  const ns = namespaced.exec(pathname);
  if (ns) {
    const [, namespace = '', name = '', action] = ns;
    return {
      namespace: decodeURIComponent(namespace),
      name: decodeURIComponent(name),
      action,
      route: `/v1/namespaces/:namespace/cubes/:cube${action === undefined ? '' : `/${action}`}`,
    };
  }
  const old = legacy.exec(pathname);
  if (old) {
    const [, name = '', action] = old;
    return {
      namespace: defaultCubeNamespace,
      name: decodeURIComponent(name),
      action,
      route: `/v1/cubes/:cube${action === undefined ? '' : `/${action}`}`,
    };
  }
  return undefined;
}
