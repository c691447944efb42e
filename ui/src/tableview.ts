// The flow table: the newest flows first, of which only the rows in view
// exist in the DOM, so that 10,000 flows cost what 40 do.

import { el } from './dom.ts';
import type { Flow } from './flow.ts';
import { type Row, row } from './render.ts';
import type { Ring } from './ring.ts';

const rowHeight = 24;
const columns: (keyof Row)[] = ['time', 'source', 'destination', 'port', 'l7', 'verdict', 'policy'];

// redrawEvery is how often, at most, rows change while flows stream in:
// nobody reads sixty rows a second, and each redraw costs a frame.
const redrawEvery = 100; // ms

export class TableView {
  private readonly body: HTMLElement;
  private readonly spacer: HTMLElement;
  // The row elements, reused; each knows the flow it shows and where,
  // so that an unchanged row is not touched.
  private readonly rows: { el: HTMLElement; cells: HTMLElement[]; flow?: Flow; top: number }[] = [];
  private last = 0;

  constructor(
    private readonly scroller: HTMLElement,
    private readonly flows: Ring<Flow>,
    private readonly onFlow: (f: Flow) => void,
  ) {
    this.spacer = el('div', { class: 'spacer' });
    this.body = el('div', { class: 'rows' });
    this.spacer.append(this.body);
    scroller.replaceChildren(this.spacer);
    scroller.addEventListener('scroll', () => this.draw(true));
  }

  // arrived keeps the rows in view still when newer flows push in above
  // them, unless the view is at the top, where they show.
  arrived(n: number): void {
    if (this.scroller.scrollTop > 0) this.scroller.scrollTop += n * rowHeight;
  }

  // draw brings the rows in view up to date: at once when forced (the
  // user scrolled, the filter changed), else at most every redrawEvery.
  // It says whether it drew: one it skipped is still to be done.
  draw(force = false): boolean {
    const now = performance.now();
    if (!force && now - this.last < redrawEvery) return false;
    this.last = now;
    const n = this.flows.length;
    this.spacer.style.height = `${n * rowHeight}px`;
    const first = Math.min(Math.floor(this.scroller.scrollTop / rowHeight), Math.max(0, n - 1));
    const count = Math.max(0, Math.min(n - first, Math.ceil(this.scroller.clientHeight / rowHeight) + 2));
    while (this.rows.length < count) this.rows.push(this.newRow());
    for (let i = 0; i < this.rows.length; i++) {
      const r = this.rows[i];
      const f = i < count ? this.flows.at(first + i) : undefined;
      if (!f) {
        if (r.flow) r.el.hidden = true;
        r.flow = undefined;
        continue;
      }
      const top = (first + i) * rowHeight;
      if (r.flow === f && r.top === top) continue;
      if (r.flow !== f) {
        const cells = row(f);
        columns.forEach((c, j) => {
          r.cells[j].textContent = cells[c];
          r.cells[j].title = cells[c];
        });
        r.el.className = `row ${(f.verdict ?? '').toLowerCase()}`;
        r.el.dataset.verdict = f.verdict ?? '';
        r.flow = f;
      }
      r.el.style.top = `${top}px`;
      r.el.hidden = false;
      r.top = top;
    }
    return true;
  }

  private newRow() {
    const cells = columns.map((c) => el('span', { class: c }));
    const r = { el: el('div', { class: 'row' }, ...cells), cells, flow: undefined as Flow | undefined, top: -1 };
    r.el.addEventListener('click', () => r.flow && this.onFlow(r.flow));
    this.body.append(r.el);
    return r;
  }
}

export function tableHeader(): HTMLElement {
  return el('div', { class: 'row header' }, ...columns.map((c) => el('span', { class: c }, c === 'l7' ? 'L7' : c)));
}
