// The service map of one namespace: its cards (workloads, Services, and
// what they talk with outside the namespace) and the edges between them,
// by protocol and port, with the verdicts and the policies behind them.
// Built incrementally, one flow at a time; replies are left out, as a
// reply is part of the edge of its request.

import { type Endpoint, type Flow, type Policy, decision, isL7, l4, policyKey, reserved } from './flow.ts';

export type CardKind = 'workload' | 'pod' | 'service' | 'world' | 'host' | 'remote-node' | 'namespace' | 'identity';

export interface Card {
  id: string;
  kind: CardKind;
  title: string;
  subtitle: string;
  // inside: the card is of the namespace shown (workloads, pods, Services).
  inside: boolean;
  // peer is one of the card's endpoints as the agent's policy trace
  // takes it (namespace/pod, or an identity), for the "why" view.
  peer: string;
}

export type Verdict = 'forwarded' | 'dropped' | 'mixed';

export interface Edge {
  id: string;
  from: string;
  to: string;
  proto: string;
  port: number;
  forwarded: number;
  dropped: number;
  l7: number;
  allowedBy: Map<string, Policy>;
  deniedBy: Map<string, Policy>;
  lastDrop?: string;
}

export function edgeVerdict(e: Edge): Verdict {
  if (e.dropped === 0) return 'forwarded';
  return e.forwarded === 0 ? 'dropped' : 'mixed';
}

// Reserved identities that stand for themselves, by the reserved label.
const reservedCards: Record<string, CardKind> = { world: 'world', 'world-ipv4': 'world', 'world-ipv6': 'world', host: 'host', 'remote-node': 'remote-node' };

// cardOf is the card an endpoint of a flow belongs to, seen from
// namespace; names are the DNS names the flow carries for its address.
export function cardOf(ep: Endpoint | undefined, names: string[] | undefined, namespace: string): Card {
  const c = cardKind(ep, names, namespace);
  return { ...c, peer: ep?.pod_name ? `${ep.namespace ?? ''}/${ep.pod_name}` : String(ep?.identity ?? 0) };
}

function cardKind(ep: Endpoint | undefined, names: string[] | undefined, namespace: string): Omit<Card, 'peer'> {
  const r = reserved(ep);
  if (r !== undefined && reservedCards[r] !== undefined) {
    const kind = reservedCards[r];
    if (kind === 'world' && names && names.length > 0) {
      return { id: `world:${names[0]}`, kind, title: names[0], subtitle: 'world', inside: false };
    }
    return { id: kind, kind, title: kind, subtitle: 'reserved identity', inside: false };
  }
  if (ep?.namespace && ep.namespace !== namespace) {
    return { id: `namespace:${ep.namespace}`, kind: 'namespace', title: ep.namespace, subtitle: 'namespace', inside: false };
  }
  if (ep?.namespace) {
    // An app's pods are one card, named by the app label as Hubble UI
    // names them: the label is on both sides of every flow, the
    // workload only where the agent knows the pod.
    const w = ep.workloads?.[0];
    const app = appOf(ep);
    if (app !== undefined) {
      return { id: `app:${app}`, kind: 'workload', title: app, subtitle: w?.kind ?? 'app', inside: true };
    }
    if (w?.name) {
      return { id: `workload:${w.kind ?? ''}/${w.name}`, kind: 'workload', title: w.name, subtitle: w.kind ?? 'workload', inside: true };
    }
    const pod = ep.pod_name ?? '';
    return { id: `pod:${pod}`, kind: 'pod', title: pod, subtitle: 'pod', inside: true };
  }
  if (r !== undefined) {
    return { id: `reserved:${r}`, kind: 'identity', title: r, subtitle: 'reserved identity', inside: false };
  }
  const id = ep?.identity ?? 0;
  return { id: `identity:${id}`, kind: 'identity', title: `identity ${id}`, subtitle: (ep?.labels ?? []).slice(0, 2).join(' '), inside: false };
}

// appLabels name an app, the first present wins.
const appLabels = ['k8s:app.kubernetes.io/name=', 'k8s:k8s-app=', 'k8s:app='];

function appOf(ep: Endpoint): string | undefined {
  for (const key of appLabels) {
    const l = ep.labels?.find((x) => x.startsWith(key));
    if (l !== undefined && l.length > key.length) return l.slice(key.length);
  }
  return undefined;
}

export interface Added {
  // The cards the flow brought, with their role in it: a card first seen
  // as a source is laid out on the left of one first seen as a
  // destination.
  cards: { card: Card; role: 'source' | 'service' | 'destination' }[];
  edges: Edge[];
  // touched are the edges the flow counted on, new or not.
  touched: Edge[];
}

export class ServiceMap {
  readonly cards = new Map<string, Card>();
  readonly edges = new Map<string, Edge>();
  constructor(readonly namespace: string) {}

  // add counts f on its edges; what it brought new is returned, so that
  // the layout places only that.
  add(f: Flow): Added {
    const added: Added = { cards: [], edges: [], touched: [] };
    if (f.is_reply === true) return added;
    const t = l4(f);
    if (!t) return added;
    const src = cardOf(f.source, f.source_names, this.namespace);
    const dst = cardOf(f.destination, f.destination_names, this.namespace);
    this.card(src, 'source', added);
    const svc = f.destination_service;
    if (svc?.name && svc.namespace === this.namespace) {
      const s: Card = { id: `service:${svc.name}`, kind: 'service', title: svc.name, subtitle: 'Service', inside: true, peer: dst.peer };
      this.card(s, 'service', added);
      this.card(dst, 'destination', added);
      this.count(src.id, s.id, t.proto, t.dstPort, f, added);
      this.count(s.id, dst.id, t.proto, t.dstPort, f, added);
    } else {
      this.card(dst, 'destination', added);
      this.count(src.id, dst.id, t.proto, t.dstPort, f, added);
    }
    return added;
  }

  private card(c: Card, role: Added['cards'][number]['role'], added: Added) {
    if (this.cards.has(c.id)) return;
    this.cards.set(c.id, c);
    added.cards.push({ card: c, role });
  }

  private count(from: string, to: string, proto: string, port: number, f: Flow, added: Added) {
    const id = `${from}|${to}|${proto}|${port}`;
    let e = this.edges.get(id);
    if (!e) {
      e = { id, from, to, proto, port, forwarded: 0, dropped: 0, l7: 0, allowedBy: new Map(), deniedBy: new Map() };
      this.edges.set(id, e);
      added.edges.push(e);
    }
    added.touched.push(e);
    if (f.verdict === 'DROPPED') {
      e.dropped++;
      e.lastDrop = f.drop_reason_desc;
    } else if ((f.verdict === 'FORWARDED' || f.verdict === 'REDIRECTED') && !halfway(f)) {
      e.forwarded++;
    }
    if (isL7(f)) e.l7++;
    const d = decision(f);
    for (const p of d.allowed) e.allowedBy.set(policyKey(p), p);
    for (const p of d.denied) e.deniedBy.set(policyKey(p), p);
  }
}

// halfway: a flow the source's egress let out toward a pod, whose own
// ingress has yet to decide; counting it as forwarded would paint a
// denied connection as half allowed.
function halfway(f: Flow): boolean {
  return f.traffic_direction === 'EGRESS' && f.destination?.pod_name !== undefined && f.destination.pod_name !== '';
}

// edgeLabel is what an edge says on the map, a line each: its port, and
// for drops the policy that denied them, so that no click is needed to
// see it.
export function edgeLabel(e: Edge): string[] {
  const port = e.proto.startsWith('ICMP') ? e.proto : `${e.proto}/${e.port}`;
  if (e.dropped === 0) return [port];
  const denied = [...e.deniedBy.values()].map((p) => p.name ?? '').filter((n) => n !== '');
  const why = denied.length > 0 ? `denied by ${denied.join(', ')}` : `dropped: ${(e.lastDrop ?? 'policy').toLowerCase().replace(/_/g, ' ')}`;
  return [port, why];
}
