/** The console's views, in navigation order. A new store kind is one more entry here. */
import type { ConsoleView } from '../view.js';
import { deadLettersView } from './dead-letters.js';
import { inspectorView } from './inspector.js';
import { instancesView } from './instances.js';
import { lagView } from './lag.js';
import { outboxView } from './outbox.js';
import { processingView } from './processing.js';
import { topologyView } from './topology.js';

export const VIEWS: readonly ConsoleView[] = [
  instancesView,
  lagView,
  processingView,
  topologyView,
  inspectorView,
  deadLettersView,
  outboxView,
];
