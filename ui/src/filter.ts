// The flow table's filter: `hubble observe`'s flags, typed as there
// (`--verdict DROPPED --to-pod web --http-status 4+`). Each flag is one
// predicate; repetitions of a flag match if one does; different flags all
// have to match; --not negates the flag after it. A flag that names no
// side (--pod, --label, ...) matches either side.

import { type Endpoint, type Flow, eventTypes, isL7, l4 } from './flow.ts';

type Pred = (f: Flow) => boolean;
type Side = 'source' | 'destination';

export interface Filter {
  match: Pred;
  // text is the filter as parsed, for the page to show.
  text: string;
}

export class FilterError extends Error {}

interface FlagSpec {
  // sided flags come as --X (either side), --from-X and --to-X.
  sided: boolean;
  build: (value: string, side: Side | undefined, ctx: Context) => Pred;
}

interface Context {
  namespace: string;
}

const verdicts = ['FORWARDED', 'DROPPED', 'ERROR', 'AUDIT', 'REDIRECTED', 'TRACED', 'TRANSLATED'];

const sides = (side: Side | undefined): Side[] => (side ? [side] : ['source', 'destination']);

// onSide matches when test holds for one of the sides asked for.
function onSide(side: Side | undefined, test: (f: Flow, s: Side) => boolean): Pred {
  return (f) => sides(side).some((s) => test(f, s));
}

function podPred(value: string, side: Side | undefined, ctx: Context): Pred {
  const [ns, prefix] = value.includes('/') ? value.split('/', 2) : [ctx.namespace, value];
  return onSide(side, (f, s) => {
    const ep = f[s];
    return ep?.namespace === ns && (ep.pod_name ?? '').startsWith(prefix);
  });
}

// labelPred takes a comma-separated list of key or key=value, all of
// which must hold; a key without a source (k8s:, reserved:) matches any.
export function labelSelector(value: string): (ep: Endpoint | undefined) => boolean {
  const terms = value.split(',').map((t) => t.trim()).filter((t) => t !== '');
  if (terms.length === 0) throw new FilterError(`label selector ${JSON.stringify(value)} is empty`);
  const parsed = terms.map((t) => {
    const eq = t.indexOf('=');
    return eq < 0 ? { key: t, value: undefined } : { key: t.slice(0, eq), value: t.slice(eq + 1) };
  });
  return (ep) => {
    const labels = ep?.labels ?? [];
    return parsed.every((term) =>
      labels.some((l) => {
        const eq = l.indexOf('=');
        const key = eq < 0 ? l : l.slice(0, eq);
        const val = eq < 0 ? '' : l.slice(eq + 1);
        const keyOK = term.key.includes(':') ? key === term.key : key.slice(key.indexOf(':') + 1) === term.key;
        return keyOK && (term.value === undefined || term.value === val);
      }),
    );
  };
}

function port(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 0 || n > 65535) throw new FilterError(`port ${JSON.stringify(value)} is not 0 to 65535`);
  return n;
}

// glob turns a DNS name pattern with * into an anchored regexp.
function glob(pattern: string): RegExp {
  if (!/^[-a-zA-Z0-9_.*]+$/.test(pattern)) throw new FilterError(`FQDN pattern ${JSON.stringify(pattern)} has characters a name cannot`);
  const re = pattern.replace(/\./g, '\\.').replace(/\*/g, '[-a-zA-Z0-9_.]*');
  return new RegExp(`^${re}\\.?$`, 'i');
}

function regexp(flag: string, value: string): RegExp {
  try {
    return new RegExp(value);
  } catch (e) {
    throw new FilterError(`--${flag} ${JSON.stringify(value)}: ${(e as Error).message}`);
  }
}

function ipPred(value: string, side: Side | undefined): Pred {
  const cidr = parseCIDR(value);
  return onSide(side, (f, s) => {
    const ip = f.IP?.[s];
    return ip !== undefined && cidr(ip);
  });
}

// parseCIDR matches an address exactly, or an IPv4 prefix.
function parseCIDR(value: string): (ip: string) => boolean {
  const [addr, bits] = value.split('/', 2);
  if (bits === undefined) return (ip) => ip === addr;
  const base = v4(addr);
  const n = Number(bits);
  if (base === undefined || !/^\d+$/.test(bits) || n > 32) throw new FilterError(`${JSON.stringify(value)} is not an address or an IPv4 CIDR`);
  const mask = n === 0 ? 0 : (~0 << (32 - n)) >>> 0;
  return (ip) => {
    const a = v4(ip);
    return a !== undefined && ((a & mask) >>> 0) === ((base & mask) >>> 0);
  };
}

function v4(s: string): number | undefined {
  const parts = s.split('.');
  if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) return undefined;
  return parts.reduce((acc, p) => ((acc << 8) | Number(p)) >>> 0, 0);
}

const reservedIdentities: Record<string, number> = { host: 1, world: 2, unmanaged: 3, health: 4, init: 5, 'remote-node': 6, 'kube-apiserver': 7, ingress: 8 };

const flags: Record<string, FlagSpec> = {
  pod: { sided: true, build: podPred },
  namespace: {
    sided: true,
    build: (v, side) => onSide(side, (f, s) => f[s]?.namespace === v),
  },
  label: {
    sided: true,
    build: (v, side) => {
      const sel = labelSelector(v);
      return onSide(side, (f, s) => sel(f[s]));
    },
  },
  ip: { sided: true, build: ipPred },
  port: {
    sided: true,
    build: (v, side) => {
      const p = port(v);
      return onSide(side, (f, s) => {
        const x = l4(f);
        return x !== undefined && (s === 'source' ? x.srcPort : x.dstPort) === p;
      });
    },
  },
  fqdn: {
    sided: true,
    build: (v, side) => {
      const re = glob(v);
      return onSide(side, (f, s) => (f[s === 'source' ? 'source_names' : 'destination_names'] ?? []).some((n) => re.test(n)));
    },
  },
  identity: {
    sided: true,
    build: (v, side) => {
      const id = reservedIdentities[v] ?? Number(v);
      if (!Number.isInteger(id) || id < 0) throw new FilterError(`identity ${JSON.stringify(v)} is not a number or a reserved name`);
      return onSide(side, (f, s) => f[s]?.identity === id);
    },
  },
  service: {
    sided: true,
    build: (v, side, ctx) => {
      const [ns, name] = v.includes('/') ? v.split('/', 2) : [ctx.namespace, v];
      return onSide(side, (f, s) => {
        const svc = f[s === 'source' ? 'source_service' : 'destination_service'];
        return svc?.namespace === ns && (svc.name ?? '').startsWith(name);
      });
    },
  },
  verdict: {
    sided: false,
    build: (v) => {
      const want = v.toUpperCase();
      if (!verdicts.includes(want)) throw new FilterError(`verdict ${JSON.stringify(v)} is not one of ${verdicts.join(', ')}`);
      return (f) => f.verdict === want;
    },
  },
  protocol: {
    sided: false,
    build: (v) => {
      const want = v.toLowerCase();
      if (want === 'http' || want === 'dns') return (f) => f.l7?.[want] !== undefined;
      const names: Record<string, string[]> = { tcp: ['TCP'], udp: ['UDP'], sctp: ['SCTP'], icmp: ['ICMPv4', 'ICMPv6'], icmpv4: ['ICMPv4'], icmpv6: ['ICMPv6'] };
      const ok = names[want];
      if (!ok) throw new FilterError(`protocol ${JSON.stringify(v)} is not tcp, udp, sctp, icmp, icmpv4, icmpv6, http or dns`);
      return (f) => ok.includes(l4(f)?.proto ?? '');
    },
  },
  type: {
    sided: false,
    build: (v) => {
      const [name, sub] = v.toLowerCase().split(':', 2);
      const t = eventTypes[name];
      if (t === undefined) throw new FilterError(`type ${JSON.stringify(v)} is not one of ${Object.keys(eventTypes).join(', ')}`);
      const point = sub?.replace(/-/g, '_').toUpperCase();
      return (f) => (name === 'l7' ? isL7(f) : f.event_type?.type === t) && (point === undefined || f.trace_observation_point === point);
    },
  },
  'http-status': {
    sided: false,
    build: (v) => {
      const m = /^([1-5])(\d\d|\+)$/.exec(v);
      if (!m) throw new FilterError(`http-status ${JSON.stringify(v)} is not a code (403) or a class (4+)`);
      return (f) => {
        const code = f.l7?.http?.code;
        if (code === undefined || code === 0) return false;
        return m[2] === '+' ? Math.floor(code / 100) === Number(m[1]) : code === Number(v);
      };
    },
  },
  'http-method': {
    sided: false,
    build: (v) => (f) => (f.l7?.http?.method ?? '').toUpperCase() === v.toUpperCase(),
  },
  'http-path': {
    sided: false,
    build: (v) => {
      const re = regexp('http-path', v);
      return (f) => {
        const url = f.l7?.http?.url;
        if (url === undefined) return false;
        try {
          return re.test(new URL(url, 'http://x').pathname);
        } catch {
          return false;
        }
      };
    },
  },
  'dns-query': {
    sided: false,
    build: (v) => {
      const re = regexp('dns-query', v);
      return (f) => f.l7?.dns?.query !== undefined && re.test(f.l7.dns.query);
    },
  },
  node: {
    sided: false,
    build: (v) => (f) => (f.node_name ?? '').includes(v),
  },
};

const shorthands: Record<string, string> = { l: 'label', n: 'namespace', t: 'type' };

// tokens splits text like a shell: whitespace separates, quotes group.
function tokens(text: string): string[] {
  const out: string[] = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) out.push(m[1] ?? m[2] ?? m[3]);
  return out;
}

// lookup resolves a flag name to its spec and side.
function lookup(name: string): { key: string; spec: FlagSpec; side?: Side } | undefined {
  name = shorthands[name] ?? name;
  if (flags[name]) return { key: name, spec: flags[name] };
  for (const [prefix, side] of [['from-', 'source'], ['to-', 'destination']] as const) {
    if (name.startsWith(prefix)) {
      const base = name.slice(prefix.length);
      if (flags[base]?.sided) return { key: name, spec: flags[base], side };
    }
  }
  return undefined;
}

// parseFilter reads the flags in text; pods without a namespace are in
// namespace. It throws a FilterError naming what is wrong.
export function parseFilter(text: string, namespace = 'default'): Filter {
  const ctx = { namespace };
  const groups = new Map<string, Pred[]>();
  const toks = tokens(text);
  let negate = false;
  for (let i = 0; i < toks.length; i++) {
    const tok = toks[i];
    const m = /^--?([a-z][a-z0-9-]*)(?:=(.*))?$/.exec(tok);
    if (!m) throw new FilterError(`${JSON.stringify(tok)}: expected a flag such as --verdict`);
    if (m[1] === 'not') {
      negate = true;
      continue;
    }
    const flag = lookup(m[1]);
    if (!flag) throw new FilterError(`unknown flag --${m[1]}`);
    let value = m[2];
    if (value === undefined) {
      value = toks[++i];
      if (value === undefined) throw new FilterError(`--${m[1]} needs a value`);
    }
    const p = flag.spec.build(value, flag.side, ctx);
    const key = (negate ? '!' : '') + flag.key;
    const pred: Pred = negate ? (f) => !p(f) : p;
    negate = false;
    groups.set(key, [...(groups.get(key) ?? []), pred]);
  }
  if (negate) throw new FilterError('--not needs a flag after it');
  const all = [...groups.entries()].map(([key, preds]) =>
    // Repetitions of a negated flag must all hold (none of the values).
    key.startsWith('!') ? (f: Flow) => preds.every((p) => p(f)) : (f: Flow) => preds.some((p) => p(f)),
  );
  return { match: (f) => all.every((p) => p(f)), text: toks.join(' ') };
}

// touches says whether a flow is of namespace: a pod or a Service of it
// on either side, as the backend selects a live stream's flows.
export function touches(f: Flow, namespace: string): boolean {
  return f.source?.namespace === namespace || f.destination?.namespace === namespace || f.destination_service?.namespace === namespace;
}
