// Jest in ESM mode loads the ESM-only @kubernetes/client-node and the CommonJS kafkajs side by side.
import { KubeConfig } from '@kubernetes/client-node';
import { AssignerProtocol } from 'kafkajs';
import { createKafka } from '../../src/kafka/client.ts';

test('client-node parses a kubeconfig', () => {
  const kc = new KubeConfig();
  kc.loadFromString(`apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: 'https://127.0.0.1:6443' } }]
users: [{ name: u, user: { token: t } }]
contexts: [{ name: x, context: { cluster: c, user: u, namespace: ns } }]
current-context: x
`);
  expect(kc.getCurrentCluster()?.server).toBe('https://127.0.0.1:6443');
  expect(kc.getContextObject('x')?.namespace).toBe('ns');
});

test('kafkajs encodes and decodes a member assignment', () => {
  const encoded = AssignerProtocol.MemberAssignment.encode({
    version: 1,
    assignment: { orders: [0, 3] },
    userData: Buffer.alloc(0),
  });
  expect(AssignerProtocol.MemberAssignment.decode(encoded)?.assignment).toEqual({ orders: [0, 3] });
  expect(typeof createKafka({ brokers: ['127.0.0.1:1'] }).consumer).toBe('function');
});
