// Building DOM nodes. Text goes in as text nodes only: flows carry what
// pods wrote, and none of it may become markup.

type Attrs = Record<string, string | number | undefined>;

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  set(e, attrs);
  e.append(...children);
  return e;
}

const svgNS = 'http://www.w3.org/2000/svg';

export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: (Node | string)[]): SVGElementTagNameMap[K] {
  const e = document.createElementNS(svgNS, tag);
  set(e, attrs);
  e.append(...children);
  return e;
}

function set(e: Element, attrs: Attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined) e.setAttribute(k, String(v));
  }
}

export function byId<T extends HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (!e) throw new Error(`page has no #${id}`);
  return e as T;
}
