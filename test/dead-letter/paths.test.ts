/**
 * Dead letters leave the process: their exception headers carry no absolute path of the host. Frames
 * in an installed package read `<package>/...`, frames under the working directory `./...`, any other
 * absolute path (a home directory, a deploy folder, a Windows drive, a file:// URL) its file name only;
 * node's own frames (`node:internal/...`) are kept. Before, the stack header held the host's absolute
 * paths (`/work/.../src/processor/apply.ts:...`, `/home/...`).
 */
import assert from 'node:assert/strict';
import { homedir } from 'node:os';
import { describe, it } from 'node:test';
import { buildDeadLetter } from '../../src/dead-letter/build.js';
import { withoutHostPaths } from '../../src/dead-letter/thrown.js';

const HOST = [process.cwd(), homedir(), '/home/', '/work/', '/root/', '/srv/', 'C:\\Users', 'file:///'];

function headerText(error: unknown): string {
  const dl = buildDeadLetter({
    source: { topic: 't', partition: 0, offset: 1, timestamp: 0, key: null, value: null, headers: {} },
    consumerGroup: 'g',
    reason: 'processing-error',
    error,
  });
  return ['kafka_dlt-exception-stacktrace', 'kafka_dlt-exception-message']
    .map((h) => String(dl.headers[h]))
    .join('\n');
}

describe('dead letters carry no host paths', () => {
  it('a thrown error (with a cause naming a host file): no absolute path in the headers', () => {
    const cause = new Error('ENOENT: open /home/alice/app/config.json');
    const err = new TypeError('reduce failed', { cause });
    const text = headerText(err);
    for (const p of HOST) assert.ok(!text.includes(p), `${p} in\n${text}`);
    assert.match(text, /\(\.\/test\/dead-letter\/paths\.test\.ts:\d+:\d+\)/, 'own frames cwd-relative');
    assert.match(text, /Caused by: Error: ENOENT: open \.\.\.\/config\.json/);
  });

  it('package frames read <package>/..., other absolute paths their file name, node frames kept', () => {
    const stack = [
      'Error: x',
      '    at f (file:///srv/app/node_modules/redfence/dist/processor/apply.js:10:5)',
      '    at g (/opt/deploy/node_modules/@acme/lib/index.js:2:3)',
      '    at h (C:\\Users\\bob\\app\\main.js:1:1)',
      '    at i (/root/x/y.js:4:4)',
      '    at ModuleJob.run (node:internal/modules/esm/module_job:325:25)',
    ].join('\n');
    assert.equal(
      withoutHostPaths(stack),
      [
        'Error: x',
        '    at f (redfence/dist/processor/apply.js:10:5)',
        '    at g (@acme/lib/index.js:2:3)',
        '    at h (.../main.js:1:1)',
        '    at i (.../y.js:4:4)',
        '    at ModuleJob.run (node:internal/modules/esm/module_job:325:25)',
      ].join('\n'),
    );
  });
});
