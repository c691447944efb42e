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
  private readonly drawn = new Map<string, DrawnEdge>();
  private readonly dirty = new Set<Edge>();
  // pairs counts the edges between two cards, to stack their labels.
  private readonly pairs = new Map<string, number>();

  constructor(
    container: HTMLElement,
    private readonly onEdge: (e: Edge) => void,
    private readonly onCard: (c: Card) => void,
  ) {
    this.root = svg('svg', { id: 'map-svg', width: 0, height: 0 });
    this.edgeLayer = svg('g', { class: 'edges' });
    this.cardLayer = svg('g', { class: 'cards' });
    this.root.append(this.edgeLayer, this.cardLayer);
    container.replaceChildren(this.root);
  }

  add(added: Added): void {
    this.layout.place(added);
    for (const { card } of added.cards) this.drawCard(card);
    for (const e of added.edges) this.dirty.add(e);
    if (added.cards.length > 0) {
      const { width, height } = this.layout.size();
      this.root.setAttribute('width', String(width + 40));
      this.root.setAttribute('height', String(height + 40));
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
      const label = svg('text', { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 6 + nth * 28, class: 'edge-label' });
      const group = svg('g', { class: 'edge-group', 'data-from': e.from, 'data-to': e.to, 'data-port': `${e.proto}/${e.port}` }, path, label);
      group.addEventListener('click', () => this.onEdge(e));
      this.edgeLayer.append(group);
      d = { path, label, group, look: '' };
      this.drawn.set(e.id, d);
    }
    const v = edgeVerdict(e);
    const lines = edgeLabel(e);
    const look = `${v}|${lines.join('|')}`;
    if (d.look === look) return;
    d.look = look;
    d.group.setAttribute('data-verdict', v);
    d.path.setAttribute('class', `edge ${v}`);
    d.label.setAttribute('class', `edge-label ${v}`);
    const x = d.label.getAttribute('x') ?? '0';
    d.label.replaceChildren(...lines.map((l, i) => svg('tspan', { x, dy: i === 0 ? 0 : 13 }, l)));
  }
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
