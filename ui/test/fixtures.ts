// Flows for the tests, as the backend sends them: built with tweaks.
import type { Endpoint, Flow } from '../src/flow.ts';

export function pod(ns: string, name: string, workload?: string, labels: string[] = []): Endpoint {
  return {
    namespace: ns,
    pod_name: name,
    identity: 1000 + name.length,
    labels: [`k8s:io.kubernetes.pod.namespace=${ns}`, ...labels],
    workloads: workload ? [{ name: workload, kind: 'Deployment' }] : undefined,
  };
}

export const world: Endpoint = { identity: 2, labels: ['reserved:world'] };
export const host: Endpoint = { identity: 1, labels: ['reserved:host'] };

export function flow(source: Endpoint, destination: Endpoint, tweak: (f: Flow) => void = () => {}): Flow {
  const f: Flow = {
    time: '2026-12-05T14:00:01.250Z',
    verdict: 'FORWARDED',
    IP: { source: '10.0.0.1', destination: '10.0.1.2' },
    l4: { TCP: { source_port: 40000, destination_port: 80 } },
    source,
    destination,
    Type: 'L3_L4',
    event_type: { type: 4 },
    is_reply: false,
    traffic_direction: 'INGRESS',
  };
  tweak(f);
  return f;
}
