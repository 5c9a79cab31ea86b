/**
 * The module every instance of `redfence chaos <module>` runs (`redfence run <this module, compiled>`):
 * the user's processor (REDFENCE_CHAOS_MODULE, loaded as `redfence run` loads it: .ts through tsx) on
 * the run's own topics and store (REDFENCE_CHAOS_INPUT, _OUTPUT, _STORE; dead letters on
 * `<input>.DLT`), whatever names the module gives. Everything else of the definition is the user's.
 */

import { defineProcessor, type ProcessorDefinition } from '../index.js';
import { loadDefinition } from '../loader/load.js';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: this module is run by redfence chaos <module>`);
  return v;
};

const loaded = await loadDefinition(env('REDFENCE_CHAOS_MODULE'));
if ('handle' in loaded) throw new Error('redfence chaos runs processors, not handlers');
const input = env('REDFENCE_CHAOS_INPUT');

export default defineProcessor({
  ...(loaded as ProcessorDefinition),
  input,
  output: env('REDFENCE_CHAOS_OUTPUT'),
  store: env('REDFENCE_CHAOS_STORE'),
  deadLetter: `${input}.DLT`,
} as ProcessorDefinition);
