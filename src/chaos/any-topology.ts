/**
 * The module every instance of `redfence chaos <topology module>` runs (`redfence run <this module,
 * compiled>`): the user's built topology (REDFENCE_CHAOS_MODULE, loaded as `redfence run` loads it) on the
 * run's own topics (REDFENCE_CHAOS_INPUT; its sinks on REDFENCE_CHAOS_OUTPUT, `-1`, `-2`...; dead letters on
 * `<input>.DLT`), its applicationId the run's store name (REDFENCE_CHAOS_STORE). Every node and function
 * is the module's (src/chaos/topology-module.ts).
 */
import { loadRunnable } from '../loader/load.js';
import { isBuiltTopology } from '../topology/build.js';
import { chaosTopics, onChaosTopics } from './topology-module.js';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: this module is run by redfence chaos <module>`);
  return v;
};

const loaded = await loadRunnable(env('REDFENCE_CHAOS_MODULE'));
if (!isBuiltTopology(loaded)) throw new Error('this module runs built topologies only');

export default onChaosTopics(
  loaded,
  chaosTopics(loaded, env('REDFENCE_CHAOS_INPUT'), env('REDFENCE_CHAOS_OUTPUT')),
  env('REDFENCE_CHAOS_STORE'),
);
