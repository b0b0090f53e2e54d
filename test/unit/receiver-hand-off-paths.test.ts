// Where hand-offs land in deep storage (relative to its directory, or to a bucket's prefix): under the cube's namespace, so that cubes of one name in
// two namespaces stay apart; a cube whose namespace is not known yet keeps the layout of before.
import { handOffKey } from '../../src/receiver/hand-off.ts';
import { countsByCountry } from '../support/fake-partition-consumer.ts';

const target = {
  cube: 'orders',
  replicaSet: 'rs-a',
  receiver: 'rs-a-0',
  schema: countsByCountry('1m', '0s'),
};
const segment = {
  windowStart: 60_000,
  epochs: new Map([[0, 2]]),
  ranges: new Map([[0, [{ from: 0n, to: 10n }]]]),
};

test.each([
  {
    name: 'namespace a',
    namespace: 'a',
    dir: 'namespace=a/orders/window=60000/replicaSet=rs-a/rs-a-0.e2',
  },
  {
    name: 'namespace b',
    namespace: 'b',
    dir: 'namespace=b/orders/window=60000/replicaSet=rs-a/rs-a-0.e2',
  },
  {
    name: 'a namespace not known yet (a checkpoint of before namespaces)',
    namespace: undefined,
    dir: 'orders/window=60000/replicaSet=rs-a/rs-a-0.e2',
  },
])('$name', ({ namespace, dir }) => {
  // The last name is `<receiver>.e<highest epoch>.<digest of what the segment covers>`.
  expect(handOffKey({ ...target, namespace }, segment)).toMatch(
    new RegExp(`^${dir.replaceAll('.', '\\.')}\\.[0-9a-f]{12}$`),
  );
});
