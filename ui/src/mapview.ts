// The service map drawn in SVG. Cards are drawn once, where the layout
// put them; edges are redrawn only when their counts changed, at most
// once a frame.

import { el, svg } from './dom.ts';
import { type Card, type Edge, edgeLabel, edgeVerdict } from './servicemap.ts';
import { Layout, cardHeight, cardWidth } from './layout.ts';
import type { Added } from './servicemap.ts';

interface DrawnEdge {
  path: SVGPathElement;
  label: SVGTextElement;
  group: SVGGElement;
  // look is the verdict and label drawn: the DOM is touched only when
  // they change, not for every flow counted.
  look: string;
}

export class MapView {
  readonly layout = new Layout();
  private readonly root: SVGSVGElement;
  private readonly edgeLayer: SVGGElement;
  private readonly cardLayer: SVGGElement;
  // Labels above the cards, so that a long one is never hidden.
  private readonly labelLayer: SVGGElement;
  private readonly drawn = new Map<string, DrawnEdge>();
  private readonly dirty = new Set<Edge>();
  // pairs counts the edges between two cards, to stack their labels.
  private readonly pairs = new Map<string, number>();

  constructor(
    private readonly container: HTMLElement,
    private readonly onEdge: (e: Edge) => void,
    private readonly onCard: (c: Card) => void,
  ) {
    this.root = svg('svg', { id: 'map-svg', width: 0, height: 0 });
    this.edgeLayer = svg('g', { class: 'edges' });
    this.cardLayer = svg('g', { class: 'cards' });
    this.labelLayer = svg('g', { class: 'labels' });
    this.root.append(this.edgeLayer, this.cardLayer, this.labelLayer);
    container.replaceChildren(this.root);
  }

  add(added: Added): void {
    const first = this.layout.positions.size === 0;
    this.layout.place(added);
    for (const { card } of added.cards) this.drawCard(card);
    for (const e of added.edges) this.dirty.add(e);
    if (added.cards.length > 0) {
      const { width, height } = this.layout.size();
      this.root.setAttribute('width', String(width + 40));
      this.root.setAttribute('height', String(height + 40));
    }
    // The view starts at the first cards' column; the cards themselves
    // never move, so a column that fills later on their left is a
    // scroll away.
    if (first && added.cards.length > 0) {
      const left = Math.min(...[...this.layout.positions.values()].map((p) => p.x));
      if (this.container.parentElement) this.container.parentElement.scrollLeft = left;
    }
  }

  touch(e: Edge): void {
    this.dirty.add(e);
  }

  // draw brings the changed edges up to date; called once a frame.
  draw(): void {
    for (const e of this.dirty) this.drawEdge(e);
    this.dirty.clear();
  }

  private drawCard(c: Card) {
    const p = this.layout.positions.get(c.id);
    if (!p) return;
    const g = svg(
      'g',
      { class: `card ${c.kind}`, transform: `translate(${p.x + 20},${p.y + 20})`, 'data-id': c.id, 'data-title': c.title, tabindex: 0 },
      svg('rect', { width: cardWidth, height: cardHeight, rx: 8 }),
      svg('text', { x: 12, y: 26, class: 'title' }, clip(c.title, 24)),
      svg('text', { x: 12, y: 46, class: 'subtitle' }, clip(c.subtitle, 30)),
      svg('title', {}, `${c.title} (${c.subtitle})`),
    );
    g.addEventListener('click', () => this.onCard(c));
    this.cardLayer.append(g);
  }

  private drawEdge(e: Edge) {
    let d = this.drawn.get(e.id);
    if (!d) {
      const a = this.layout.positions.get(e.from);
      const b = this.layout.positions.get(e.to);
      if (!a || !b) return;
      const pair = `${e.from}|${e.to}`;
      const nth = this.pairs.get(pair) ?? 0;
      this.pairs.set(pair, nth + 1);
      const x1 = a.x + 20 + cardWidth;
      const y1 = a.y + 20 + cardHeight / 2;
      const x2 = b.x + 20;
      const y2 = b.y + 20 + cardHeight / 2;
      const bend = Math.max(60, Math.abs(x2 - x1) / 2);
      const path = svg('path', { d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`, class: 'edge' });
      // The label ends where the edge reaches its destination, so that
      // an edge across a column is not labelled over that column.
      const at = labelPoint(x1, y1, x2, y2, bend);
      const label = svg('text', { x: at.x, y: at.y - 6 + nth * 28, class: 'edge-label' });
      const group = svg('g', { class: 'edge-group', 'data-from': e.from, 'data-to': e.to, 'data-port': `${e.proto}/${e.port}` }, path);
      group.addEventListener('click', () => this.onEdge(e));
      label.addEventListener('click', () => this.onEdge(e));
      this.edgeLayer.append(group);
      this.labelLayer.append(label);
      d = { path, label, group, look: '' };
      this.drawn.set(e.id, d);
    }
    const v = edgeVerdict(e);
    const lines = edgeLabel(e);
    const look = `${v}|${lines.join('|')}`;
    if (d.look === look) return;
    d.look = look;
    d.group.setAttribute('data-verdict', v);
    d.group.setAttribute('data-label', lines.join(' · '));
    d.path.setAttribute('class', `edge ${v}`);
    d.label.setAttribute('class', `edge-label ${v}`);
    const x = d.label.getAttribute('x') ?? '0';
    d.label.replaceChildren(...lines.map((l, i) => svg('tspan', { x, dy: i === 0 ? 0 : 13 }, l)));
  }
}

// labelPoint is where an edge's label ends: on its curve just before the
// destination, so that the label reads into the gap towards its source
// (the middle of the curve when it runs backwards); found by bisection
// on x.
function labelPoint(x1: number, y1: number, x2: number, y2: number, bend: number): { x: number; y: number } {
  const at = (t: number, a: number, b: number, c: number, d: number) =>
    (1 - t) ** 3 * a + 3 * (1 - t) ** 2 * t * b + 3 * (1 - t) * t ** 2 * c + t ** 3 * d;
  const cx = (t: number) => at(t, x1, x1 + bend, x2 - bend, x2);
  const cy = (t: number) => at(t, y1, y1, y2, y2);
  if (x2 <= x1) return { x: cx(0.5), y: cy(0.5) };
  const want = Math.max((x1 + x2) / 2, x2 - 10);
  let lo = 0;
  let hi = 1;
  for (let i = 0; i < 30; i++) {
    const mid = (lo + hi) / 2;
    if (cx(mid) < want) lo = mid;
    else hi = mid;
  }
  return { x: cx(lo), y: cy(lo) };
}

function clip(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

export function legend(): HTMLElement {
  return el(
    'div',
    { class: 'legend' },
    el('span', { class: 'swatch forwarded' }),
    'forwarded',
    el('span', { class: 'swatch dropped' }),
    'dropped',
    el('span', { class: 'swatch mixed' }),
    'both',
  );
}
