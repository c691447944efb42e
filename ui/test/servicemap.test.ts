import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ServiceMap, cardOf, edgeLabel, edgeVerdict } from '../src/servicemap.ts';
import { flow, host, pod, world } from './fixtures.ts';

const client = pod('shop', 'client-7d9f', 'client');
const web = pod('shop', 'web-5c6b', 'web');

test('cards stand for workloads, pods, Services, namespaces and reserved identities', () => {
  assert.equal(cardOf(client, undefined, 'shop').id, 'workload:Deployment/client');
  assert.equal(cardOf(client, undefined, 'shop').peer, 'shop/client-7d9f');
  assert.equal(cardOf(pod('shop', 'bare'), undefined, 'shop').id, 'pod:bare');
  assert.equal(cardOf(pod('kube-system', 'coredns-1', 'coredns'), undefined, 'shop').id, 'namespace:kube-system');
  assert.equal(cardOf(world, undefined, 'shop').id, 'world');
  assert.equal(cardOf(world, undefined, 'shop').peer, '2');
  assert.equal(cardOf(world, ['www.cilium-lab.test'], 'shop').title, 'www.cilium-lab.test');
  assert.equal(cardOf(host, undefined, 'shop').kind, 'host');
  assert.equal(cardOf({ identity: 6, labels: ['reserved:remote-node'] }, undefined, 'shop').kind, 'remote-node');
  assert.equal(cardOf({ identity: 7, labels: ['reserved:kube-apiserver'] }, undefined, 'shop').id, 'reserved:kube-apiserver');
  assert.equal(cardOf({ identity: 16777220, labels: ['cidr:10.0.0.0/8'] }, undefined, 'shop').id, 'identity:16777220');
});

test("an app's pods are one card, named by the app label, with or without their workload", () => {
  const local = pod('shop', 'web-5c6b-x1', 'web', ['k8s:app=web']);
  const remote = pod('shop', 'web-5c6b-x2', undefined, ['k8s:app=web']);
  assert.equal(cardOf(local, undefined, 'shop').id, 'app:web');
  assert.equal(cardOf(local, undefined, 'shop').subtitle, 'Deployment');
  assert.equal(cardOf(remote, undefined, 'shop').id, 'app:web');
  assert.equal(cardOf(remote, undefined, 'shop').subtitle, 'app');
  assert.equal(cardOf(pod('shop', 'x', undefined, ['k8s:app.kubernetes.io/name=shopfront', 'k8s:app=other']), undefined, 'shop').title, 'shopfront');
  assert.equal(cardOf(pod('shop', 'x', undefined, ['k8s:k8s-app=dns']), undefined, 'shop').title, 'dns');
});

test("a pod's egress letting a connection out is not its forwarding: the destination's ingress decides", () => {
  const m = new ServiceMap('shop');
  const a = m.add(flow(client, web, (f) => {
    f.traffic_direction = 'EGRESS';
    f.event_type = { type: 5 };
    f.egress_allowed_by = [{ name: 'allow-all', kind: 'builtin' }];
  }));
  m.add(flow(client, web, (f) => {
    f.verdict = 'DROPPED';
    f.ingress_denied_by = [{ name: 'deny-client', namespace: 'shop', kind: 'CiliumNetworkPolicy' }];
  }));
  assert.equal(edgeVerdict(a.edges[0]), 'dropped');
  // Toward the world, the egress is the last word.
  const w = m.add(flow(client, world, (f) => (f.traffic_direction = 'EGRESS')));
  assert.equal(edgeVerdict(w.edges[0]), 'forwarded');
  assert.equal(w.edges[0].forwarded, 1);
});

test('edges carry protocol and port, and are coloured by their verdicts', () => {
  const m = new ServiceMap('shop');
  const a = m.add(flow(client, web));
  assert.deepEqual(
    a.cards.map((c) => [c.card.id, c.role]),
    [
      ['workload:Deployment/client', 'source'],
      ['workload:Deployment/web', 'destination'],
    ],
  );
  const e = m.edges.get('workload:Deployment/client|workload:Deployment/web|TCP|80')!;
  assert.equal(edgeVerdict(e), 'forwarded');
  assert.deepEqual(edgeLabel(e), ['TCP/80']);
  // A reply is part of its request's edge.
  assert.equal(m.add(flow(web, client, (f) => (f.is_reply = true))).touched.length, 0);
  assert.equal(m.edges.size, 1);
  m.add(
    flow(client, web, (f) => {
      f.verdict = 'DROPPED';
      f.drop_reason_desc = 'POLICY_DENY';
      f.ingress_denied_by = [{ name: 'deny-client', namespace: 'shop', kind: 'CiliumNetworkPolicy' }];
    }),
  );
  assert.equal(edgeVerdict(e), 'mixed');
  assert.deepEqual(edgeLabel(e), ['TCP/80', 'denied by deny-client']);
  const other = m.add(flow(client, web, (f) => {
    f.verdict = 'DROPPED';
    f.drop_reason_desc = 'POLICY_DENIED';
    f.l4 = { TCP: { source_port: 1, destination_port: 8080 } };
  }));
  assert.equal(edgeVerdict(other.edges[0]), 'dropped');
  assert.deepEqual(edgeLabel(other.edges[0]), ['TCP/8080', 'dropped: policy denied']);
});

test('a Service is a card between its clients and its backends', () => {
  const m = new ServiceMap('shop');
  const a = m.add(flow(client, web, (f) => (f.destination_service = { name: 'web', namespace: 'shop' })));
  assert.deepEqual(
    a.cards.map((c) => c.card.id),
    ['workload:Deployment/client', 'service:web', 'workload:Deployment/web'],
  );
  assert.deepEqual([...m.edges.keys()], ['workload:Deployment/client|service:web|TCP|80', 'service:web|workload:Deployment/web|TCP|80']);
  assert.equal(m.cards.get('service:web')!.peer, 'shop/web-5c6b');
});

test('allowing and denying policies are kept per edge, once each', () => {
  const m = new ServiceMap('shop');
  const allow = { name: 'allow-web', namespace: 'shop', kind: 'NetworkPolicy' };
  for (let i = 0; i < 3; i++) m.add(flow(client, web, (f) => (f.ingress_allowed_by = [allow])));
  const e = [...m.edges.values()][0];
  assert.equal(e.forwarded, 3);
  assert.deepEqual([...e.allowedBy.values()], [allow]);
});
