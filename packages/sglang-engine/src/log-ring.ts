/** A bounded buffer of the last log lines. */
export class LogRing {
  private readonly lines: string[] = [];
  constructor(private readonly capacity = 2000) {}

  push(line: string): void {
    this.lines.push(line);
    if (this.lines.length > this.capacity) this.lines.splice(0, this.lines.length - this.capacity);
  }

  tail(n = 100): string {
    return this.lines.slice(-n).join('\n');
  }
}
