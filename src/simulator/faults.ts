/**
 * Which fault, if any, a request meets. One {@link FaultState} per project: the per-rule counters
 * and the seeded random generator live here, so two projects never disturb each other's faults.
 */
import type { Endpoint, FaultRule, Faults } from './scenario.js';

/** The fault counters and random generator of one project's current scenario. */
export class FaultState {
  readonly #rules: readonly FaultRule[];
  readonly #seen: number[];
  /** Per rule, the epoch ms its `forMs` window closes; null until it first applies. */
  readonly #closesAt: (number | null)[];
  readonly #random: () => number;

  constructor(faults: Faults, projectId: string) {
    this.#rules = faults.rules ?? [];
    this.#seen = this.#rules.map(() => 0);
    this.#closesAt = this.#rules.map(() => null);
    // Mixing in the project ID gives every project its own reproducible sequence.
    this.#random = mulberry32((faults.seed ?? 1) ^ hash(projectId));
  }

  /**
   * The first rule that applies to this request, counting it at every rule it reaches. A request
   * taken by an earlier rule is not counted by later ones, so `first` of the second rule counts the
   * requests after the first rule's: rules read as a sequence. `now` (epoch ms) times `forMs`.
   */
  pick(endpoint: Endpoint, now: number): FaultRule | null {
    for (const [index, rule] of this.#rules.entries()) {
      if (rule.endpoint !== 'any' && rule.endpoint !== endpoint) continue;
      const seen = (this.#seen[index] ?? 0) + 1;
      this.#seen[index] = seen;
      const closesAt = this.#closesAt[index] ?? null;
      if (closesAt !== null && now >= closesAt) continue;
      if (!this.#applies(rule, seen)) continue;
      if (closesAt === null && rule.forMs !== undefined) this.#closesAt[index] = now + rule.forMs;
      return rule;
    }
    return null;
  }

  #applies(rule: FaultRule, seen: number): boolean {
    const position = seen - (rule.skip ?? 0);
    if (position < 1) return false;
    if (rule.first !== undefined && position > rule.first) return false;
    // The generator is drawn only for rate rules, so adding a counted rule never shifts the sequence.
    if (rule.rate !== undefined) return this.#random() < rule.rate;
    return true;
  }
}

/** A small, well-known 32-bit generator: reproducible from its seed, good enough for fault odds. */
function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a: a stable number from a project ID. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
