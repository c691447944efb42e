// The side panel: a flow's every field, an edge's verdicts and policies,
// a policy's YAML, and the "why" view, which asks the agent's policy
// trace about a source, a destination and a port.

import * as api from './api.ts';
import { byId, el } from './dom.ts';
import { type Flow, type Policy, l4, policyName } from './flow.ts';
import { fields, l7Text } from './render.ts';
import { type Card, type Edge, edgeVerdict } from './servicemap.ts';

export class Panel {
  private readonly body = byId('panel-body');
  private readonly title = byId('panel-title');

  // cards are the current map's: the map is new for each namespace, the
  // panel (and its one listener on the why form) is not.
  constructor(private readonly cards: () => Map<string, Card>) {
    byId<HTMLFormElement>('why-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      void this.why();
    });
  }

  private show(title: string, ...content: Node[]) {
    this.title.textContent = title;
    this.body.replaceChildren(...content);
  }

  flow(f: Flow): void {
    const t = l4(f);
    const rows = fields(f).map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, v)));
    const l7 = l7Text(f);
    this.show(
      'Flow',
      ...(l7 ? [el('p', { class: 'l7' }, l7)] : []),
      policyList('Denied by', [...(f.egress_denied_by ?? []), ...(f.ingress_denied_by ?? [])], (p) => this.policy(p)),
      policyList('Allowed by', [...(f.egress_allowed_by ?? []), ...(f.ingress_allowed_by ?? [])], (p) => this.policy(p)),
      el('table', { class: 'fields' }, ...rows),
    );
    if (f.source && f.destination && t) {
      this.prefill(
        f.source.pod_name ? `${f.source.namespace}/${f.source.pod_name}` : String(f.source.identity ?? ''),
        f.destination.pod_name ? `${f.destination.namespace}/${f.destination.pod_name}` : String(f.destination.identity ?? ''),
        t.dstPort,
        t.proto,
      );
    }
  }

  edge(e: Edge): void {
    const from = this.cards().get(e.from);
    const to = this.cards().get(e.to);
    this.show(
      `${from?.title ?? e.from} → ${to?.title ?? e.to}`,
      el('p', {}, `${e.proto}/${e.port}: ${edgeVerdict(e)}, ${e.forwarded} forwarded, ${e.dropped} dropped${e.l7 ? `, ${e.l7} layer 7` : ''}`),
      policyList('Denied by', [...e.deniedBy.values()], (p) => this.policy(p)),
      policyList('Allowed by', [...e.allowedBy.values()], (p) => this.policy(p)),
    );
    if (from && to) this.prefill(from.peer, to.peer, e.port, e.proto);
  }

  card(c: Card): void {
    this.show(c.title, el('p', {}, `${c.subtitle}; ${c.id}`), el('p', {}, `trace as: ${c.peer}`));
  }

  async policy(p: Policy): Promise<void> {
    const o = { kind: p.kind ?? '', namespace: p.namespace, name: p.name ?? '' };
    this.show(`${o.kind} ${policyName(p)}`, el('p', {}, 'loading…'));
    try {
      this.show(`${o.kind} ${policyName(p)}`, el('pre', { class: 'yaml' }, await api.policyYAML(o)));
    } catch (e) {
      this.show(`${o.kind} ${policyName(p)}`, el('p', { class: 'error' }, (e as Error).message));
    }
  }

  private prefill(src: string, dst: string, port: number, proto: string) {
    byId<HTMLInputElement>('why-src').value = src;
    byId<HTMLInputElement>('why-dst').value = dst;
    byId<HTMLInputElement>('why-port').value = String(port);
    const p = proto.toLowerCase().startsWith('icmp') ? 'icmp' : proto.toLowerCase();
    byId<HTMLSelectElement>('why-proto').value = p;
  }

  private async why() {
    const src = byId<HTMLInputElement>('why-src').value.trim();
    const dst = byId<HTMLInputElement>('why-dst').value.trim();
    const port = byId<HTMLInputElement>('why-port').value.trim();
    const proto = byId<HTMLSelectElement>('why-proto').value;
    const out = byId('why-result');
    out.replaceChildren(el('p', {}, 'asking the agent…'));
    try {
      const tr = await api.trace(src, dst, port, proto);
      out.replaceChildren(
        el('p', { class: `verdict ${tr.allowed ? 'forwarded' : 'dropped'}`, 'data-allowed': String(tr.allowed) }, tr.allowed ? 'ALLOWED' : 'DENIED'),
        this.direction('Source egress', tr.egress),
        this.direction('Destination ingress', tr.ingress),
      );
    } catch (e) {
      out.replaceChildren(el('p', { class: 'error' }, (e as Error).message));
    }
  }

  private direction(name: string, v: api.TraceVerdict): HTMLElement {
    const rules = v.decidedBy ?? [];
    const what = !v.enforced ? 'not enforced: allowed' : v.allowed ? 'allowed' : 'denied';
    const by =
      rules.length > 0
        ? rules.map((r) => policyLink({ kind: r.kind, namespace: r.namespace, name: r.name }, () => void this.policy(r)))
        : [v.enforced && !v.allowed ? 'no rule allows it (default deny)' : ''];
    return el('div', { class: 'direction' }, el('strong', {}, `${name}: ${what}`), el('span', { class: 'rules' }, ...joined(by)));
  }
}

// The kinds whose YAML the API server holds; the agent's own rules
// (kind builtin) have none.
const stored = ['NetworkPolicy', 'CiliumNetworkPolicy', 'CiliumClusterwideNetworkPolicy'];

// policyLink names a policy, linked to its YAML where there is one.
function policyLink(p: Policy, open: () => void): HTMLElement {
  const text = `${p.kind ?? ''} ${policyName(p)}`;
  if (!stored.includes(p.kind ?? '')) return el('span', { class: 'policy-builtin', title: "the agent's own rule" }, text);
  const a = el('a', { href: '#', class: 'policy-link', 'data-name': p.name ?? '' }, text);
  a.addEventListener('click', (ev) => {
    ev.preventDefault();
    open();
  });
  return a;
}

function joined(items: (Node | string)[]): (Node | string)[] {
  return items.flatMap((x, i) => (i === 0 ? [' ', x] : [', ', x]));
}

function policyList(title: string, ps: Policy[], open: (p: Policy) => void): Node {
  if (ps.length === 0) return document.createTextNode('');
  return el(
    'p',
    { class: `policies ${title === 'Denied by' ? 'denied' : 'allowed'}` },
    `${title}:`,
    ...joined(ps.map((p) => policyLink(p, () => open(p)))),
  );
}
