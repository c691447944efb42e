// What the flow table and the detail pane show of a flow, as text: the
// page puts it in the DOM as text only (textContent), never as markup,
// since pods write much of it (URLs, headers, DNS names, labels).

import { type Endpoint, type Flow, decision, isL7, l4, latencyMs, policyName, reserved } from './flow.ts';

export interface Row {
  time: string;
  source: string;
  destination: string;
  port: string;
  l7: string;
  verdict: string;
  policy: string;
}

function two(n: number, w = 2): string {
  return String(n).padStart(w, '0');
}

// clock is a flow's time of day, to the millisecond, in UTC.
export function clock(time: string | undefined): string {
  if (!time) return '';
  const d = new Date(time);
  if (Number.isNaN(d.getTime())) return time;
  return `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}.${two(d.getUTCMilliseconds(), 3)}`;
}

// peer names one side: namespace/pod, else the DNS names, else the
// reserved identity, else the address.
export function peer(ep: Endpoint | undefined, names: string[] | undefined, ip: string | undefined): string {
  if (ep?.pod_name) return `${ep.namespace ?? ''}/${ep.pod_name}`;
  if (names && names.length > 0) return names.join(', ');
  const r = reserved(ep);
  if (r && ip) return `${ip} (${r})`;
  return r ?? ip ?? '';
}

// l7Text is an L7 flow in a line: the request, its answer and its time.
export function l7Text(f: Flow): string {
  if (!isL7(f) || !f.l7) return '';
  const ms = latencyMs(f);
  const took = ms !== undefined && ms > 0 ? ` ${ms.toFixed(ms < 10 ? 2 : 0)}ms` : '';
  const h = f.l7.http;
  if (h) {
    const code = h.code ? ` ${h.code}` : '';
    return `${f.l7.type === 'RESPONSE' ? '←' : '→'} ${h.method ?? ''} ${h.url ?? ''}${code}${took}`.trim();
  }
  const d = f.l7.dns;
  if (d) {
    const answer = [...(d.cnames ?? []), ...(d.ips ?? [])].join(', ');
    const rcode = d.rcode ? ` rcode ${d.rcode}` : '';
    const q = `DNS ${(d.qtypes ?? []).join(',')} ${d.query ?? ''}`.replace(/\s+/g, ' ');
    return f.l7.type === 'RESPONSE' ? `${q} → ${answer || 'no answer'}${rcode}${took}` : q;
  }
  return f.l7.type ?? 'L7';
}

export function row(f: Flow): Row {
  const t = l4(f);
  const d = decision(f);
  const named = [...d.denied.map((p) => `denied by ${policyName(p)}`), ...d.allowed.map((p) => `allowed by ${policyName(p)}`)];
  const svc = f.destination_service?.name ? ` (${f.destination_service.namespace}/${f.destination_service.name})` : '';
  const verdict = f.verdict ?? '';
  return {
    time: clock(f.time),
    source: peer(f.source, f.source_names, f.IP?.source),
    destination: peer(f.destination, f.destination_names, f.IP?.destination) + svc,
    port: t ? (t.proto.startsWith('ICMP') ? `${t.proto} type ${t.dstPort}` : `${t.proto}/${t.dstPort}`) : '',
    l7: l7Text(f),
    verdict: verdict === 'DROPPED' && f.drop_reason_desc ? `DROPPED (${f.drop_reason_desc})` : verdict,
    policy: named.join('; '),
  };
}

// fields flattens a value into dotted paths and their values, every
// field of it, for the detail pane.
export function fields(v: unknown, prefix = ''): [string, string][] {
  if (v === null || v === undefined) return [];
  if (Array.isArray(v)) {
    if (v.every((x) => typeof x !== 'object' || x === null)) return [[prefix, v.join(', ')]];
    return v.flatMap((x, i) => fields(x, `${prefix}[${i}]`));
  }
  if (typeof v === 'object') {
    return Object.entries(v as Record<string, unknown>).flatMap(([k, x]) => fields(x, prefix ? `${prefix}.${k}` : k));
  }
  return [[prefix, String(v)]];
}
