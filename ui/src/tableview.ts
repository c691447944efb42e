// The flow table: the newest flows first, of which only the rows in view
// exist in the DOM, so that 10,000 flows cost what 40 do.

import { el } from './dom.ts';
import type { Flow } from './flow.ts';
import { type Row, row } from './render.ts';
import type { Ring } from './ring.ts';

const rowHeight = 24;
const columns: (keyof Row)[] = ['time', 'source', 'destination', 'port', 'l7', 'verdict', 'policy'];

export class TableView {
  private readonly body: HTMLElement;
  private readonly spacer: HTMLElement;
  private shown = 0;

  constructor(
    private readonly scroller: HTMLElement,
    private readonly flows: Ring<Flow>,
    private readonly onFlow: (f: Flow) => void,
  ) {
    this.spacer = el('div', { class: 'spacer' });
    this.body = el('div', { class: 'rows' });
    this.spacer.append(this.body);
    scroller.replaceChildren(this.spacer);
    scroller.addEventListener('scroll', () => this.draw());
  }

  // arrived keeps the rows in view still when newer flows push in above
  // them, unless the view is at the top, where they show.
  arrived(n: number): void {
    if (this.scroller.scrollTop > 0) this.scroller.scrollTop += n * rowHeight;
  }

  draw(): void {
    const n = this.flows.length;
    this.spacer.style.height = `${n * rowHeight}px`;
    const first = Math.min(Math.floor(this.scroller.scrollTop / rowHeight), Math.max(0, n - 1));
    const count = Math.min(n - first, Math.ceil(this.scroller.clientHeight / rowHeight) + 2);
    const rows: HTMLElement[] = [];
    for (let i = 0; i < count; i++) {
      const f = this.flows.at(first + i);
      if (!f) break;
      const r = row(f);
      const tr = el('div', { class: `row ${(f.verdict ?? '').toLowerCase()}`, 'data-verdict': f.verdict ?? '', style: `top:${(first + i) * rowHeight}px` });
      for (const c of columns) tr.append(el('span', { class: c, title: r[c] }, r[c]));
      tr.addEventListener('click', () => this.onFlow(f));
      rows.push(tr);
    }
    this.body.replaceChildren(...rows);
    this.shown = rows.length;
  }

  get rowsShown(): number {
    return this.shown;
  }
}

export function tableHeader(): HTMLElement {
  return el('div', { class: 'row header' }, ...columns.map((c) => el('span', { class: c }, c === 'l7' ? 'L7' : c)));
}
