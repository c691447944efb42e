// A bounded window of the newest items: the page keeps this many flows
// and forgets the oldest, so that its memory stays flat on a busy cluster.
export class Ring<T> {
  private readonly items: (T | undefined)[];
  private next = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity ${capacity}: want 1 or more`);
    this.items = new Array<T | undefined>(capacity);
  }

  get length(): number {
    return this.count;
  }

  // push adds x and returns the item it pushed out, if any.
  push(x: T): T | undefined {
    const out = this.count === this.capacity ? this.items[this.next] : undefined;
    this.items[this.next] = x;
    this.next = (this.next + 1) % this.capacity;
    this.count = Math.min(this.count + 1, this.capacity);
    return out;
  }

  // at is the i-th newest item (0: the newest).
  at(i: number): T | undefined {
    if (i < 0 || i >= this.count) return undefined;
    return this.items[(this.next - 1 - i + this.capacity) % this.capacity];
  }

  clear(): void {
    this.items.fill(undefined);
    this.next = 0;
    this.count = 0;
  }
}
