import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clock, fields, l7Text, row } from '../src/render.ts';
import { Ring } from '../src/ring.ts';
import { flow, pod, world } from './fixtures.ts';

const client = pod('shop', 'client-7d9f', 'client');
const web = pod('shop', 'web-5c6b', 'web');

test('a row names both sides, the port, the verdict and the policies', () => {
  const r = row(
    flow(client, web, (f) => {
      f.verdict = 'DROPPED';
      f.drop_reason_desc = 'POLICY_DENY';
      f.destination_service = { name: 'web', namespace: 'shop' };
      f.ingress_denied_by = [{ name: 'deny-client', namespace: 'shop', kind: 'CiliumNetworkPolicy' }];
    }),
  );
  assert.deepEqual(r, {
    time: '14:00:01.250',
    source: 'shop/client-7d9f',
    destination: 'shop/web-5c6b (shop/web)',
    port: 'TCP/80',
    l7: '',
    verdict: 'DROPPED (POLICY_DENY)',
    policy: 'denied by shop/deny-client',
  });
  assert.equal(row(flow(client, world, (f) => (f.destination_names = ['www.cilium-lab.test']))).destination, 'www.cilium-lab.test');
  assert.equal(row(flow(client, world)).destination, '10.0.1.2 (world)');
  assert.equal(row(flow(client, web, (f) => (f.l4 = { ICMPv4: { type: 8 } }))).port, 'ICMPv4 type 8');
});

test('L7 flows show method, path, code and latency, or query and answer', () => {
  const l7 = (tweak: Parameters<typeof flow>[2]) =>
    l7Text(
      flow(client, web, (f) => {
        f.Type = 'L7';
        f.event_type = { type: 129 };
        tweak?.(f);
      }),
    );
  assert.equal(l7((f) => (f.l7 = { type: 'REQUEST', http: { method: 'GET', url: 'http://web/private' } })), '→ GET http://web/private');
  assert.equal(l7((f) => (f.l7 = { type: 'RESPONSE', latency_ns: '2500000', http: { method: 'GET', url: 'http://web/', code: 403 } })), '← GET http://web/ 403 2.50ms');
  assert.equal(l7((f) => (f.l7 = { type: 'REQUEST', dns: { query: 'world.cilium-lab.test.', qtypes: ['A'] } })), 'DNS A world.cilium-lab.test.');
  assert.equal(
    l7((f) => (f.l7 = { type: 'RESPONSE', latency_ns: 1200000, dns: { query: 'www.cilium-lab.test.', qtypes: ['A'], cnames: ['world.cilium-lab.test.'], ips: ['192.0.2.1'] } })),
    'DNS A www.cilium-lab.test. → world.cilium-lab.test., 192.0.2.1 1.20ms',
  );
  assert.equal(l7((f) => (f.l7 = { type: 'RESPONSE', dns: { query: 'nope.test.', rcode: 3 } })), 'DNS nope.test. → no answer rcode 3');
  assert.equal(l7Text(flow(client, web)), '');
});

test('the detail pane has every field, pod-written text as it is', () => {
  const f = flow(client, web, (x) => {
    x.l7 = { type: 'REQUEST', http: { method: 'GET', url: 'http://web/<img src=x onerror=alert(1)>' } };
    (x as Record<string, unknown>).some_future_field = { nested: [1, 2] };
  });
  const m = new Map(fields(f));
  assert.equal(m.get('l7.http.url'), 'http://web/<img src=x onerror=alert(1)>');
  assert.equal(m.get('source.workloads[0].name'), 'client');
  assert.equal(m.get('source.labels'), 'k8s:io.kubernetes.pod.namespace=shop');
  assert.equal(m.get('some_future_field.nested'), '1, 2');
  assert.equal(m.get('l4.TCP.destination_port'), '80');
  assert.equal(m.get('is_reply'), 'false');
});

test('clock keeps what it cannot read', () => {
  assert.equal(clock('2026-12-05T09:03:04.005Z'), '09:03:04.005');
  assert.equal(clock('yesterday'), 'yesterday');
  assert.equal(clock(undefined), '');
});

test('the window keeps the newest items only', () => {
  const r = new Ring<number>(3);
  assert.equal(r.push(1), undefined);
  r.push(2);
  r.push(3);
  assert.equal(r.push(4), 1);
  assert.deepEqual([r.at(0), r.at(1), r.at(2), r.at(3)], [4, 3, 2, undefined]);
  assert.equal(r.length, 3);
  r.clear();
  assert.equal(r.length, 0);
  assert.throws(() => new Ring(0), /capacity 0/);
});
