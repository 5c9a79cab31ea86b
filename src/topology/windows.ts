/**
 * Window definitions, with Kafka Streams' names and rules (org.apache.kafka.streams.kstream.TimeWindows,
 * SlidingWindows, SessionWindows). Their values are checked when the topology is built, so a bad window
 * is an RF_TOPOLOGY_INVALID error naming the aggregation, not an exception at the call.
 */

/** A window as the built topology describes it (plain data). */
export type WindowSpec =
  | {
      readonly kind: 'tumbling';
      readonly sizeMs: number;
      readonly advanceMs: number;
      readonly graceMs: number;
    }
  | {
      readonly kind: 'hopping';
      readonly sizeMs: number;
      readonly advanceMs: number;
      readonly graceMs: number;
    }
  | { readonly kind: 'sliding'; readonly timeDifferenceMs: number; readonly graceMs: number }
  | { readonly kind: 'session'; readonly inactivityGapMs: number; readonly graceMs: number };

/** Fixed-size windows `[start, start + size)`, tumbling (advance = size) or hopping (advance < size). */
export class TimeWindows {
  private constructor(
    readonly sizeMs: number,
    readonly graceMs: number,
    readonly advanceMs: number,
  ) {}

  /** Windows of `sizeMs`, accepting records up to `graceMs` after a window's end (in stream time). */
  static ofSizeAndGrace(sizeMs: number, graceMs: number): TimeWindows {
    return new TimeWindows(sizeMs, graceMs, sizeMs);
  }

  /** Windows of `sizeMs` with no grace: a record is late once stream time reached its window's end. */
  static ofSizeWithNoGrace(sizeMs: number): TimeWindows {
    return new TimeWindows(sizeMs, 0, sizeMs);
  }

  /** Hopping windows: a new window starts every `advanceMs` (0 < advance <= size). */
  advanceBy(advanceMs: number): TimeWindows {
    return new TimeWindows(this.sizeMs, this.graceMs, advanceMs);
  }

  /** @internal */
  spec(): WindowSpec {
    const kind = this.advanceMs === this.sizeMs ? 'tumbling' : 'hopping';
    return { kind, sizeMs: this.sizeMs, advanceMs: this.advanceMs, graceMs: this.graceMs };
  }
}

/** Sliding windows: every window `[t - difference, t]` (both ends inclusive) that holds a record. */
export class SlidingWindows {
  private constructor(
    readonly timeDifferenceMs: number,
    readonly graceMs: number,
  ) {}

  static ofTimeDifferenceAndGrace(timeDifferenceMs: number, graceMs: number): SlidingWindows {
    return new SlidingWindows(timeDifferenceMs, graceMs);
  }

  static ofTimeDifferenceWithNoGrace(timeDifferenceMs: number): SlidingWindows {
    return new SlidingWindows(timeDifferenceMs, 0);
  }

  /** @internal */
  spec(): WindowSpec {
    return { kind: 'sliding', timeDifferenceMs: this.timeDifferenceMs, graceMs: this.graceMs };
  }
}

/** Session windows: records of a key closer than the inactivity gap form one session `[first, last]`. */
export class SessionWindows {
  private constructor(
    readonly inactivityGapMs: number,
    readonly graceMs: number,
  ) {}

  static ofInactivityGapAndGrace(inactivityGapMs: number, graceMs: number): SessionWindows {
    return new SessionWindows(inactivityGapMs, graceMs);
  }

  static ofInactivityGapWithNoGrace(inactivityGapMs: number): SessionWindows {
    return new SessionWindows(inactivityGapMs, 0);
  }

  /** @internal */
  spec(): WindowSpec {
    return { kind: 'session', inactivityGapMs: this.inactivityGapMs, graceMs: this.graceMs };
  }
}

/** Any window definition `windowedBy` takes. */
export type Windows = TimeWindows | SlidingWindows | SessionWindows;

/**
 * The time windows a timestamp falls in, by start (Kafka Streams' TimeWindows.windowsFor): starts are
 * multiples of advance, none below 0, ascending.
 */
export function timeWindowsFor(spec: { sizeMs: number; advanceMs: number }, timestamp: number): number[] {
  const starts: number[] = [];
  for (let start = firstWindowStart(spec, timestamp); start <= timestamp; start += spec.advanceMs)
    starts.push(start);
  return starts;
}

/**
 * The first (smallest) start of the time windows a timestamp falls in; the others follow every advance
 * up to the timestamp ({@link timeWindowsFor}, for a caller walking them without the array).
 */
export function firstWindowStart(spec: { sizeMs: number; advanceMs: number }, timestamp: number): number {
  const { sizeMs, advanceMs } = spec;
  return Math.floor(Math.max(0, timestamp - sizeMs + advanceMs) / advanceMs) * advanceMs;
}

/**
 * How many time windows (starts: multiples of advance, none below 0) start in [fromMs, toMs], and
 * the first of them; `starts` lists them (call it only for a count you accept).
 */
export function timeWindowStartsIn(
  spec: { advanceMs: number },
  fromMs: number,
  toMs: number,
): { count: number; starts: () => number[] } {
  const a = spec.advanceMs;
  const first = Math.ceil(Math.max(0, fromMs) / a) * a;
  const count = toMs < first ? 0 : Math.floor((toMs - first) / a) + 1;
  return { count, starts: () => Array.from({ length: count }, (_, i) => first + i * a) };
}

/** Why a window spec is invalid, or null (the build() check). */
export function windowProblem(spec: WindowSpec): string | null {
  const bad = (n: number) => !Number.isSafeInteger(n);
  if (bad(spec.graceMs) || spec.graceMs < 0) return `grace must be an integer >= 0 (got ${spec.graceMs})`;
  switch (spec.kind) {
    case 'tumbling':
    case 'hopping':
      if (bad(spec.sizeMs) || spec.sizeMs <= 0) return `size must be an integer > 0 (got ${spec.sizeMs})`;
      if (bad(spec.advanceMs) || spec.advanceMs <= 0)
        return `advance must be an integer > 0 (got ${spec.advanceMs})`;
      if (spec.advanceMs > spec.sizeMs)
        return `advance (${spec.advanceMs}) must not be larger than size (${spec.sizeMs})`;
      return null;
    case 'sliding':
      if (bad(spec.timeDifferenceMs) || spec.timeDifferenceMs < 0)
        return `time difference must be an integer >= 0 (got ${spec.timeDifferenceMs})`;
      return null;
    case 'session':
      if (bad(spec.inactivityGapMs) || spec.inactivityGapMs <= 0)
        return `inactivity gap must be an integer > 0 (got ${spec.inactivityGapMs})`;
      return null;
  }
}
