import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Layout, cardHeight, cardWidth } from '../src/layout.ts';
import { ServiceMap } from '../src/servicemap.ts';
import { flow, pod, world } from './fixtures.ts';

test('columns follow the traffic left to right', () => {
  const m = new ServiceMap('shop');
  const l = new Layout();
  const client = pod('shop', 'client-1', 'client');
  const web = pod('shop', 'web-1', 'web');
  l.place(m.add(flow(world, client)));
  l.place(m.add(flow(client, web, (f) => (f.destination_service = { name: 'web', namespace: 'shop' }))));
  l.place(m.add(flow(web, world, (f) => (f.destination_names = ['api.example.test']))));
  const col = (id: string) => l.positions.get(id)!.column;
  assert.equal(col('world'), 0);
  assert.equal(col('workload:Deployment/client'), 3); // first seen as a destination of the world
  assert.equal(col('service:web'), 2);
  assert.equal(col('workload:Deployment/web'), 3);
  assert.equal(col('world:api.example.test'), 4);
});

test('cards never move and never overlap as more arrive', () => {
  const m = new ServiceMap('shop');
  const l = new Layout();
  const before = new Map<string, string>();
  let seed = 7;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return Math.floor((seed / 2147483648) * n);
  };
  for (let i = 0; i < 500; i++) {
    const a = pod('shop', `a-${rand(60)}`, `w${rand(100)}`);
    const b = rand(5) === 0 ? pod(`ns${rand(4)}`, 'x', 'y') : pod('shop', `b-${rand(60)}`, `w${rand(100)}`);
    l.place(m.add(flow(a, b)));
    for (const [id, p] of before) assert.equal(JSON.stringify(l.positions.get(id)), p, `${id} moved`);
    for (const [id, p] of l.positions) if (!before.has(id)) before.set(id, JSON.stringify(p));
  }
  assert.ok(l.positions.size >= 100, `${l.positions.size} cards`);
  const boxes = [...l.positions.values()];
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i];
      const b = boxes[j];
      const apart = a.x + cardWidth <= b.x || b.x + cardWidth <= a.x || a.y + cardHeight <= b.y || b.y + cardHeight <= a.y;
      assert.ok(apart, `cards ${i} and ${j} overlap`);
    }
  }
  const { width, height } = l.size();
  assert.ok(width > 0 && height > 0);
});
