// The backend's answers (pkg/hubble/ui), under relative paths so that the
// page works behind a prefix (kubectl proxy, the API server's service
// proxy).

export interface PolicyOrigin {
  kind: string;
  namespace?: string;
  name: string;
}

export interface TraceVerdict {
  allowed: boolean;
  enforced: boolean;
  decidedBy: PolicyOrigin[] | null;
}

export interface Trace {
  source: { identity: number; labels: string[] | null };
  destination: { identity: number; labels: string[] | null };
  protocol: string;
  port: number;
  egress: TraceVerdict;
  ingress: TraceVerdict;
  allowed: boolean;
}

async function get(path: string, params: Record<string, string>): Promise<Response> {
  const q = new URLSearchParams(params).toString();
  const resp = await fetch(q ? `${path}?${q}` : path);
  if (!resp.ok) {
    let msg = `${resp.status} ${resp.statusText}`;
    try {
      msg = ((await resp.json()) as { error?: string }).error ?? msg;
    } catch {
      // not JSON: the status says it
    }
    throw new Error(msg);
  }
  return resp;
}

export async function namespaces(): Promise<string[]> {
  return ((await (await get('api/namespaces', {})).json()) as { namespaces: string[] }).namespaces;
}

export async function policyYAML(p: PolicyOrigin): Promise<string> {
  return (await get('api/policy', { kind: p.kind, namespace: p.namespace ?? '', name: p.name })).text();
}

export async function trace(src: string, dst: string, dport: string, protocol: string): Promise<Trace> {
  return (await (await get('api/trace', { src, dst, dport, protocol })).json()) as Trace;
}

export async function status(): Promise<{ trace: boolean; relayError?: string }> {
  return (await (await get('api/status', {})).json()) as { trace: boolean; relayError?: string };
}
