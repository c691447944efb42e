// The flows as the backend sends them and the exporter writes them: JSON
// GetFlowsResponses with the protobufs' own field names (protojson
// UseProtoNames). Only the fields the page reads are typed; the detail
// pane shows every field, typed or not.

export interface Workload {
  name?: string;
  kind?: string;
}

export interface Endpoint {
  ID?: number;
  identity?: number;
  cluster_name?: string;
  namespace?: string;
  labels?: string[];
  pod_name?: string;
  workloads?: Workload[];
}

export interface Policy {
  name?: string;
  namespace?: string;
  labels?: string[];
  kind?: string;
}

export interface Service {
  name?: string;
  namespace?: string;
}

interface Ports {
  source_port?: number;
  destination_port?: number;
}

export interface Layer4 {
  TCP?: Ports & { flags?: Record<string, boolean> };
  UDP?: Ports;
  SCTP?: Ports;
  ICMPv4?: { type?: number; code?: number };
  ICMPv6?: { type?: number; code?: number };
}

export interface HTTP {
  code?: number;
  method?: string;
  url?: string;
  protocol?: string;
}

export interface DNS {
  query?: string;
  ips?: string[];
  cnames?: string[];
  rcode?: number;
  qtypes?: string[];
}

export interface Layer7 {
  type?: string;
  latency_ns?: string | number;
  http?: HTTP;
  dns?: DNS;
}

export interface Flow {
  time?: string;
  uuid?: string;
  verdict?: string;
  drop_reason_desc?: string;
  IP?: { source?: string; destination?: string };
  l4?: Layer4;
  l7?: Layer7;
  source?: Endpoint;
  destination?: Endpoint;
  Type?: string;
  node_name?: string;
  source_names?: string[];
  destination_names?: string[];
  is_reply?: boolean;
  event_type?: { type?: number; sub_type?: number };
  source_service?: Service;
  destination_service?: Service;
  traffic_direction?: string;
  trace_observation_point?: string;
  Summary?: string;
  egress_allowed_by?: Policy[];
  ingress_allowed_by?: Policy[];
  egress_denied_by?: Policy[];
  ingress_denied_by?: Policy[];
}

export interface FlowsResponse {
  flow?: Flow;
  node_name?: string;
  time?: string;
  lost_events?: { source?: string; num_events_lost?: string | number };
}

export interface L4 {
  proto: string;
  srcPort: number;
  dstPort: number;
}

// l4 is the flow's transport and ports; for ICMP the type stands in the
// destination port, as policy does.
export function l4(f: Flow): L4 | undefined {
  const x = f.l4;
  if (!x) return undefined;
  for (const proto of ['TCP', 'UDP', 'SCTP'] as const) {
    const p = x[proto];
    if (p) return { proto, srcPort: p.source_port ?? 0, dstPort: p.destination_port ?? 0 };
  }
  for (const proto of ['ICMPv4', 'ICMPv6'] as const) {
    const p = x[proto];
    if (p) return { proto, srcPort: 0, dstPort: p.type ?? 0 };
  }
  return undefined;
}

// Hubble's monitor event types (event_type.type).
export const eventTypes: Record<string, number> = {
  drop: 1,
  debug: 2,
  capture: 3,
  trace: 4,
  'policy-verdict': 5,
  'trace-sock': 7,
  agent: 9,
  l7: 129,
};

export function isL7(f: Flow): boolean {
  return f.Type === 'L7' || f.event_type?.type === eventTypes.l7;
}

export interface Decision {
  allowed: Policy[];
  denied: Policy[];
}

// decision is the policies a flow names as allowing or denying it.
export function decision(f: Flow): Decision {
  return {
    allowed: [...(f.egress_allowed_by ?? []), ...(f.ingress_allowed_by ?? [])],
    denied: [...(f.egress_denied_by ?? []), ...(f.ingress_denied_by ?? [])],
  };
}

export function policyKey(p: Policy): string {
  return `${p.kind ?? ''}/${p.namespace ?? ''}/${p.name ?? ''}`;
}

export function policyName(p: Policy): string {
  return p.namespace ? `${p.namespace}/${p.name ?? ''}` : (p.name ?? '');
}

// reserved is the reserved label of an endpoint (world, host, ...), if any.
export function reserved(ep: Endpoint | undefined): string | undefined {
  for (const l of ep?.labels ?? []) {
    if (l.startsWith('reserved:')) return l.slice('reserved:'.length);
  }
  return undefined;
}

// latencyMs is an L7 flow's latency in milliseconds (uint64 comes as a
// string in JSON).
export function latencyMs(f: Flow): number | undefined {
  const ns = f.l7?.latency_ns;
  if (ns === undefined) return undefined;
  const n = Number(ns);
  return Number.isFinite(n) ? n / 1e6 : undefined;
}
