// OwnWrites: which version a reconcile works from when the informer cache lags its own writes.
import type { KubernetesObject } from '@kubernetes/client-node';
import { OwnWrites } from '../../src/operator/own-writes.ts';

const at = (resourceVersion: string, phase = ''): KubernetesObject & { phase: string } => ({
  metadata: { namespace: 'shop', name: 'orders', resourceVersion },
  phase,
});
type Versioned = ReturnType<typeof at>;

/** The reconciler read v1, wrote v2 over it, then v3 over v2. */
function afterTwoWrites(): OwnWrites<Versioned> {
  const writes = new OwnWrites<Versioned>();
  writes.wrote(at('1', 'Planned'), at('2', 'Pausing'));
  writes.wrote(at('2', 'Pausing'), at('3', 'Draining'));
  return writes;
}

describe('OwnWrites.read', () => {
  test.each<[string, Versioned | undefined, string | undefined]>([
    ['the cache still at the version read first: the last write', at('1', 'Planned'), '3'],
    ['the cache at the first write: the last write', at('2', 'Pausing'), '3'],
    ['the cache at the last write: the cache', at('3', 'Draining'), '3'],
    ['the cache past it (another writer): the cache', at('7', 'Draining'), '7'],
    ['the object gone from the cache: nothing', undefined, undefined],
  ])('%s', (_, cached, expected) => {
    expect(afterTwoWrites().read('shop/orders', cached)?.metadata?.resourceVersion).toBe(expected);
  });

  test('without writes the cache is read as it is', () => {
    expect(new OwnWrites<Versioned>().read('shop/orders', at('1'))).toEqual(at('1'));
  });

  test('once the cache has caught up, the writes are forgotten', () => {
    const writes = afterTwoWrites();
    writes.read('shop/orders', at('3'));
    // An older version arriving now is no longer known as superseded (informers only move forward).
    expect(writes.read('shop/orders', at('1'))?.metadata?.resourceVersion).toBe('1');
  });

  test('writes to one object do not change what another reads', () => {
    const writes = afterTwoWrites();
    const other = {
      metadata: { namespace: 'shop', name: 'returns', resourceVersion: '1' },
      phase: '',
    };
    expect(writes.read('shop/returns', other)).toBe(other);
  });
});

describe('OwnWrites.isOwnWrite: the watch event of an own write does not requeue the object', () => {
  test.each<[string, Versioned, boolean]>([
    ['the first write', at('2'), true],
    ['the last write', at('3'), true],
    ['the version it read, written by someone else', at('1'), false],
    ['a later version (someone else wrote after)', at('7'), false],
    [
      'the same version of another object',
      { metadata: { namespace: 'shop', name: 'returns', resourceVersion: '3' }, phase: '' },
      false,
    ],
  ])('%s', (_, event, own) => {
    expect(afterTwoWrites().isOwnWrite(event)).toBe(own);
  });

  test('an object gone from the cache forgets its writes', () => {
    const writes = afterTwoWrites();
    writes.read('shop/orders', undefined);
    expect(writes.isOwnWrite(at('3'))).toBe(false);
  });
});
