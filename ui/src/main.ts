// Hubble UI's page: one namespace's service map and flows, live from the
// relay, over a time window, or replayed from an exporter's file.

import * as api from './api.ts';
import { byId, el } from './dom.ts';
import { type Filter, FilterError, parseFilter, touches } from './filter.ts';
import type { Flow, FlowsResponse } from './flow.ts';
import { MapView, legend } from './mapview.ts';
import { Panel } from './panel.ts';
import { Ring } from './ring.ts';
import { ServiceMap } from './servicemap.ts';
import { TableView, tableHeader } from './tableview.ts';

// windowSize is how many flows the page keeps: the newest.
const windowSize = 10_000;

// Flows arrive faster than a frame may take to count them: they wait in
// a queue, and each frame counts what fits in frameBudget ms. A page that
// cannot keep up lets the oldest waiting flows go beyond maxPending, and
// says how many.
const frameBudget = 8;
const maxPending = 50_000;

// retryAfter is the wait before a live stream that failed is opened again.
const retryAfter = 3000;

const windows: Record<string, number> = { live: 0, '5m': 5 * 60_000, '1h': 60 * 60_000 };

class App {
  private namespace: string;
  private filter: Filter = { match: () => true, text: '' };
  private readonly flows = new Ring<Flow>(windowSize);
  private readonly shown = new Ring<Flow>(windowSize);
  private map!: ServiceMap;
  private view!: MapView;
  private readonly panel = new Panel(() => this.map.cards);
  private readonly table: TableView;
  private source?: EventSource;
  private seen = 0;
  private lost = 0;
  private arrived = 0;
  private dirty = false;
  private note = '';
  private pending: FlowsResponse[] = [];
  // replayed is a loaded file's whole content, for its namespaces.
  private replayed: FlowsResponse[] = [];
  private skipped = 0;

  constructor() {
    this.namespace = new URLSearchParams(location.search).get('namespace') || 'default';
    byId('table-header').replaceChildren(tableHeader());
    byId('legend').replaceChildren(legend());
    this.table = new TableView(byId('table'), this.shown, (f) => this.panel.flow(f));
    this.reset();
    byId<HTMLSelectElement>('namespace').addEventListener('change', (ev) => this.setNamespace((ev.target as HTMLSelectElement).value));
    byId<HTMLSelectElement>('mode').addEventListener('change', () => this.stream());
    byId<HTMLInputElement>('replay').addEventListener('change', (ev) => {
      const file = (ev.target as HTMLInputElement).files?.[0];
      if (file) void this.replay(file);
    });
    let timer: number | undefined;
    byId<HTMLInputElement>('filter').addEventListener('input', (ev) => {
      clearTimeout(timer);
      timer = window.setTimeout(() => this.setFilter((ev.target as HTMLInputElement).value), 150);
    });
    const frame = () => {
      if (this.pending.length > 0) this.drain();
      if (this.dirty) this.draw();
      requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
    setInterval(() => this.status(), 1000);
    void this.loadNamespaces();
    void api.status().then((s) => {
      if (!s.trace) byId('why').setAttribute('hidden', '');
      if (s.relayError) this.note = `relay: ${s.relayError}`;
    });
    this.stream();
  }

  private reset() {
    this.pending = [];
    this.skipped = 0;
    this.flows.clear();
    this.shown.clear();
    this.map = new ServiceMap(this.namespace);
    this.view = new MapView(
      byId('map'),
      (e) => this.panel.edge(e),
      (c) => this.panel.card(c),
    );
    this.seen = this.lost = 0;
    this.dirty = true;
  }

  private async loadNamespaces(extra: string[] = []) {
    let names = extra;
    if (names.length === 0) {
      try {
        names = await api.namespaces();
      } catch (e) {
        this.note = `namespaces: ${(e as Error).message}`;
      }
    }
    if (!names.includes(this.namespace)) names = [...names, this.namespace].sort();
    byId('namespace').replaceChildren(...names.map((n) => el('option', { value: n }, n)));
    byId<HTMLSelectElement>('namespace').value = this.namespace;
  }

  private setNamespace(ns: string) {
    this.namespace = ns;
    const url = new URL(location.href);
    url.searchParams.set('namespace', ns);
    history.replaceState(null, '', url);
    if (this.source === undefined && byId<HTMLSelectElement>('mode').value === 'replay') {
      this.showReplay();
      return;
    }
    this.stream();
  }

  private setFilter(text: string) {
    const err = byId('filter-error');
    try {
      this.filter = parseFilter(text, this.namespace);
      err.textContent = '';
    } catch (e) {
      if (!(e instanceof FilterError)) throw e;
      err.textContent = e.message;
      return;
    }
    this.shown.clear();
    for (let i = this.flows.length - 1; i >= 0; i--) {
      const f = this.flows.at(i)!;
      if (this.filter.match(f)) this.shown.push(f);
    }
    this.table.draw(true);
  }

  // stream (re)opens the relay's stream for the namespace and the mode.
  private stream() {
    this.source?.close();
    this.source = undefined;
    const mode = byId<HTMLSelectElement>('mode');
    if (mode.value === 'replay') mode.value = 'live';
    this.replayed = [];
    this.reset();
    const q = new URLSearchParams({ namespace: this.namespace });
    const span = windows[mode.value] ?? 0;
    if (span === 0) {
      // Live: the newest flows the nodes hold first, then what comes.
      q.set('last', String(windowSize));
    } else {
      const now = Date.now();
      q.set('since', new Date(now - span).toISOString());
      q.set('until', new Date(now).toISOString());
    }
    const es = new EventSource(`api/flows?${q}`);
    this.source = es;
    this.note = span > 0 ? 'loading the window…' : 'live';
    es.addEventListener('flows', (ev) => this.enqueue(JSON.parse((ev as MessageEvent<string>).data) as FlowsResponse[]));
    es.addEventListener('end', () => {
      es.close();
      this.note = 'window loaded';
    });
    es.addEventListener('error', (ev) => {
      // The relay failed (its error comes as data) or the connection
      // broke: a window is over; live starts again in a moment, from the
      // newest flows, with what it showed cleared so that none counts
      // twice.
      const data = (ev as MessageEvent<string>).data;
      this.note = data ? `relay: ${(JSON.parse(data) as { error: string }).error}` : 'stream broken';
      es.close();
      if (span === 0) {
        this.note += `; again in ${retryAfter / 1000}s`;
        setTimeout(() => {
          if (this.source === es) this.stream();
        }, retryAfter);
      }
    });
  }

  // enqueue queues flows to count; a live stream's queue is bounded, a
  // replayed file's is not (it is in memory whole already).
  private enqueue(batch: FlowsResponse[], bounded = true) {
    for (const r of batch) this.pending.push(r);
    if (bounded && this.pending.length > maxPending) {
      const over = this.pending.length - maxPending;
      this.pending.splice(0, over);
      this.skipped += over;
    }
  }

  // drain counts waiting flows for at most frameBudget ms.
  private drain() {
    const start = performance.now();
    let done = 0;
    while (done < this.pending.length && performance.now() - start < frameBudget) {
      const end = Math.min(done + 200, this.pending.length);
      this.ingest(this.pending.slice(done, end));
      done = end;
    }
    this.pending.splice(0, done);
  }

  private ingest(batch: FlowsResponse[]) {
    let n = 0;
    for (const r of batch) {
      if (r.lost_events) this.lost += Number(r.lost_events.num_events_lost ?? 0);
      const f = r.flow;
      if (!f) continue;
      f.node_name ??= r.node_name;
      this.seen++;
      this.flows.push(f);
      if (this.filter.match(f)) {
        this.shown.push(f);
        n++;
      }
      this.mapFlow(f);
    }
    this.arrived += batch.length;
    this.table.arrived(n);
    this.dirty = true;
  }

  private mapFlow(f: Flow) {
    const added = this.map.add(f);
    if (added.cards.length > 0 || added.edges.length > 0) this.view.add(added);
    for (const e of added.touched) this.view.touch(e);
  }

  // showReplay shows the replayed file's flows of the namespace, as a
  // live stream would have sent them.
  private showReplay() {
    this.reset();
    this.enqueue(
      this.replayed.filter((r) => r.flow !== undefined && touches(r.flow, this.namespace)),
      false,
    );
  }

  private async replay(file: File) {
    this.source?.close();
    this.source = undefined;
    const text = await file.text();
    const all: FlowsResponse[] = [];
    let bad = 0;
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      try {
        all.push(JSON.parse(line) as FlowsResponse);
      } catch {
        bad++;
      }
    }
    const names = new Set<string>();
    for (const r of all) {
      for (const ep of [r.flow?.source, r.flow?.destination]) if (ep?.namespace) names.add(ep.namespace);
    }
    if (!names.has(this.namespace) && names.size > 0) this.namespace = [...names].sort()[0];
    byId<HTMLSelectElement>('mode').value = 'replay';
    await this.loadNamespaces([...names].sort());
    this.replayed = all;
    this.showReplay();
    this.note = `replay of ${file.name}: ${all.length} records${bad ? `, ${bad} lines not JSON` : ''}`;
  }

  private draw() {
    this.view.draw();
    // A table that waits out its redraw interval keeps the frame loop
    // asking, so that the last flows to arrive are drawn too.
    this.dirty = !this.table.draw();
  }

  private status() {
    const rate = this.arrived;
    this.arrived = 0;
    byId('status').textContent =
      `${this.namespace}: ${this.map.cards.size} cards, ${this.map.edges.size} edges; ` +
      `${this.seen} flows (${rate}/s), ${this.shown.length} shown of the last ${this.flows.length}` +
      `${this.lost ? `; ${this.lost} events lost` : ''}${this.skipped ? `; ${this.skipped} flows skipped by the page` : ''}` +
      `${this.note ? `; ${this.note}` : ''}`;
  }
}

new App();
