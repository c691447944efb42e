// Where cards go on the map. A card is placed once, when it first
// appears, and never moves: a map that reshuffles on every new card
// cannot be read while it updates. Columns follow the traffic from left
// to right: who calls into the namespace from outside, the namespace's
// clients, its Services, its servers, and what it calls outside.

import type { Added, Card } from './servicemap.ts';

export const cardWidth = 180;
export const cardHeight = 64;
export const columnGap = 150;
export const rowGap = 28;

export interface Position {
  x: number;
  y: number;
  column: number;
  row: number;
}

export function columnOf(card: Card, role: Added['cards'][number]['role']): number {
  if (role === 'service') return 2;
  if (role === 'source') return card.inside ? 1 : 0;
  return card.inside ? 3 : 4;
}

export class Layout {
  readonly positions = new Map<string, Position>();
  private readonly rows: number[] = [];

  // place gives each new card of added the next row of its column.
  place(added: Added): void {
    for (const { card, role } of added.cards) {
      if (this.positions.has(card.id)) continue;
      const column = columnOf(card, role);
      const row = this.rows[column] ?? 0;
      this.rows[column] = row + 1;
      this.positions.set(card.id, { column, row, x: column * (cardWidth + columnGap), y: row * (cardHeight + rowGap) });
    }
  }

  // size is the extent of the placed cards.
  size(): { width: number; height: number } {
    let width = 0;
    let height = 0;
    for (const p of this.positions.values()) {
      width = Math.max(width, p.x + cardWidth);
      height = Math.max(height, p.y + cardHeight);
    }
    return { width, height };
  }
}
