/**
 * An application's layout marker: `rf:[t=<tenant>:]{<app>}:layout` (a hash, field `l`), the layout of
 * its window keys. Layout 2: a time window keeps its value and its timestamp in one key
 * (`…:w:<s>:<start>`, fields `v` and `t`); before it (layout 1, no marker) the timestamp was a second
 * key (`…:w:<s+1>:<start>`), which this version never reads. A processor checks the marker at start,
 * before it takes any partition, and claims it when absent; a reader only checks. An application whose
 * partition epochs exist but whose marker does not ran before the marker: with time windows its windows
 * may be in layout 1, so it is refused (RF_STATE_LAYOUT) rather than read without its timestamps.
 */
import { RedfenceError } from '../errors/index.js';

/** The layout this version writes and reads. */
export const STORE_LAYOUT = '2';

/** What a layout check needs to know of the application. */
export interface LayoutCheck {
  /** The topics the application reads (their partition 0's epoch key tells whether it ran). */
  readonly topics: readonly string[];
  /** It keeps time windows (without them, state from before the marker reads the same). */
  readonly windowed: boolean;
  /** Write the marker when it holds none (a processor at start; a reader only reads). */
  readonly claim: boolean;
}

/** The Redis calls of a check: the marker read or claimed, an epoch key probed. */
export interface LayoutPort {
  readonly app: string;
  marker(claim: boolean): Promise<string | null>;
  ran(topic: string): Promise<boolean>;
}

function refused(app: string, layout: string, why: string): RedfenceError {
  return new RedfenceError(
    'RF_STATE_LAYOUT',
    `application ${app}: ${why}; stop every instance, delete the application's state and rebuild it from its input (docs/streams.md, "Upgrading the state of time windows")`,
    { details: { app, layout } },
  );
}

/**
 * Checks (and with `claim`, claims) the application's layout; RF_STATE_LAYOUT when it is not this
 * version's. Returns the marker after it (null: none, a reader's check of an application not started).
 */
export async function checkLayout(port: LayoutPort, check: LayoutCheck): Promise<string | null> {
  const marker = await port.marker(false);
  if (marker === STORE_LAYOUT) return marker;
  if (marker !== null)
    throw refused(
      port.app,
      marker,
      `its state is in layout ${marker}, this version reads layout ${STORE_LAYOUT}`,
    );
  if (check.windowed)
    for (const topic of check.topics)
      if (await port.ran(topic))
        throw refused(
          port.app,
          '1',
          `its state was written before time windows kept their timestamp in their own key (it has partition epochs of ${topic} and no layout marker)`,
        );
  if (!check.claim) return null;
  const now = await port.marker(true);
  if (now !== STORE_LAYOUT)
    throw refused(
      port.app,
      String(now),
      `its layout marker holds ${String(now)}, not layout ${STORE_LAYOUT}`,
    );
  return now;
}
