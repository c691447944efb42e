import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FilterError, parseFilter, touches } from '../src/filter.ts';
import { flow, pod, world } from './fixtures.ts';

const client = pod('shop', 'client-7d9f', 'client', ['k8s:app=client']);
const web = pod('shop', 'web-5c6b', 'web', ['k8s:app=web', 'k8s:tier=front']);
const forwarded = flow(client, web);
const dropped = flow(client, web, (f) => {
  f.verdict = 'DROPPED';
  f.drop_reason_desc = 'POLICY_DENIED';
});
const http403 = flow(client, web, (f) => {
  f.Type = 'L7';
  f.event_type = { type: 129 };
  f.l7 = { type: 'RESPONSE', latency_ns: '2500000', http: { code: 403, method: 'GET', url: 'http://web/admin?x=1' } };
});
const dns = flow(client, pod('kube-system', 'coredns-1'), (f) => {
  f.l4 = { UDP: { source_port: 5353, destination_port: 53 } };
  f.Type = 'L7';
  f.event_type = { type: 129 };
  f.l7 = { type: 'REQUEST', dns: { query: 'world.cilium-lab.test.', qtypes: ['A'] } };
});
const toWorld = flow(client, world, (f) => {
  f.destination_names = ['www.cilium-lab.test'];
  f.IP = { source: '10.0.0.1', destination: '192.0.2.1' };
});
const all = { forwarded, dropped, http403, dns, toWorld };

function matching(text: string): string[] {
  const fl = parseFilter(text, 'shop');
  return Object.entries(all)
    .filter(([, f]) => fl.match(f))
    .map(([k]) => k);
}

test('flags select as hubble observe does', () => {
  const cases: [string, string[]][] = [
    ['', ['forwarded', 'dropped', 'http403', 'dns', 'toWorld']],
    ['--verdict DROPPED', ['dropped']],
    ['--verdict dropped', ['dropped']],
    ['--not --verdict DROPPED', ['forwarded', 'http403', 'dns', 'toWorld']],
    ['--to-pod web', ['forwarded', 'dropped', 'http403']],
    ['--to-pod shop/web-5', ['forwarded', 'dropped', 'http403']],
    ['--from-pod web', []],
    ['--pod web', ['forwarded', 'dropped', 'http403']],
    ['--to-namespace kube-system', ['dns']],
    ['-n kube-system', ['dns']],
    ['--to-label app=web', ['forwarded', 'dropped', 'http403']],
    ['--to-label k8s:app=web,tier=front', ['forwarded', 'dropped', 'http403']],
    ['--to-label app=web,tier=back', []],
    ['--from-label app', ['forwarded', 'dropped', 'http403', 'dns', 'toWorld']],
    ['--protocol udp', ['dns']],
    ['--protocol http', ['http403']],
    ['--protocol dns', ['dns']],
    ['--port 53', ['dns']],
    ['--to-port 80', ['forwarded', 'dropped', 'http403', 'toWorld']],
    ['--from-port 80', []],
    ['--type l7', ['http403', 'dns']],
    ['--type trace', ['forwarded', 'dropped', 'toWorld']],
    ['--http-status 403', ['http403']],
    ['--http-status 4+', ['http403']],
    ['--http-status 5+', []],
    ['--http-method get', ['http403']],
    ['--http-path ^/admin$', ['http403']],
    ['--dns-query cilium-lab', ['dns']],
    ['--to-fqdn *.cilium-lab.test', ['toWorld']],
    ['--fqdn www.cilium-lab.test', ['toWorld']],
    ['--to-ip 192.0.2.0/24', ['toWorld']],
    ['--ip 192.0.2.1', ['toWorld']],
    ['--to-identity world', ['toWorld']],
    // Repetitions of a flag: either value; different flags: both.
    ['--verdict DROPPED --verdict FORWARDED --protocol udp', ['dns']],
    ['--to-pod web --verdict=FORWARDED', ['forwarded', 'http403']],
    ['--not --verdict DROPPED --not --verdict FORWARDED', []],
    ['--to-label "app=web"', ['forwarded', 'dropped', 'http403']],
  ];
  for (const [text, want] of cases) assert.deepEqual(matching(text), want, text);
});

test('bad filters name what is wrong', () => {
  const cases: [string, RegExp][] = [
    ['--verdict MAYBE', /verdict "MAYBE" is not one of FORWARDED/],
    ['--color red', /unknown flag --color/],
    ['--to-verdict DROPPED', /unknown flag --to-verdict/],
    ['--port', /--port needs a value/],
    ['--port 70000', /port "70000" is not 0 to 65535/],
    ['--http-status 99', /http-status "99" is not a code/],
    ['--protocol gopher', /protocol "gopher" is not tcp/],
    ['--type magic', /type "magic" is not one of/],
    ['--http-path (', /--http-path "\(":/],
    ['--to-ip 10.0.0.0/33', /not an address or an IPv4 CIDR/],
    ['--to-fqdn "a b"', /has characters a name cannot/],
    ['verdict', /"verdict": expected a flag/],
    ['--not', /--not needs a flag after it/],
    ['--label ,', /label selector "," is empty/],
  ];
  for (const [text, want] of cases) {
    assert.throws(() => parseFilter(text), (e: unknown) => e instanceof FilterError && want.test(e.message), text);
  }
});

test("a namespace's flows are those with a pod or a Service of it on a side", () => {
  assert.equal(touches(forwarded, 'shop'), true);
  assert.equal(touches(dns, 'kube-system'), true);
  assert.equal(touches(toWorld, 'kube-system'), false);
  assert.equal(touches(flow(world, pod('other', 'x'), (f) => (f.destination_service = { name: 'web', namespace: 'shop' })), 'shop'), true);
  assert.equal(touches(flow(world, pod('other', 'x')), 'shop'), false);
});
