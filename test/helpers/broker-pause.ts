/**
 * How a test stops the Kafka broker and brings it back (test/kafka/commit.test.ts): the local one of
 * `dev/kafka.sh` with its `pause`/`resume` (SIGSTOP/SIGCONT); a broker named by KAFKA_BROKERS with the
 * shell commands in REDFENCE_TEST_BROKER_PAUSE and REDFENCE_TEST_BROKER_RESUME; without them, why the
 * test cannot run (it cannot stop a broker it did not start).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);
const kafkaScript = new URL('../../dev/kafka.sh', import.meta.url).pathname;

type Step = () => Promise<unknown>;

export function brokerControl(): { pause: Step; resume: Step } | { skip: string } {
  const pause = process.env.REDFENCE_TEST_BROKER_PAUSE;
  const resume = process.env.REDFENCE_TEST_BROKER_RESUME;
  if (pause || resume) {
    if (!pause || !resume)
      throw new Error('set both REDFENCE_TEST_BROKER_PAUSE and REDFENCE_TEST_BROKER_RESUME, or neither');
    return { pause: () => run('sh', ['-c', pause]), resume: () => run('sh', ['-c', resume]) };
  }
  if (process.env.KAFKA_BROKERS)
    return {
      skip:
        `stops the broker, and KAFKA_BROKERS=${process.env.KAFKA_BROKERS} is one these tests did not start: ` +
        'set REDFENCE_TEST_BROKER_PAUSE and REDFENCE_TEST_BROKER_RESUME to shell commands that make every ' +
        "broker stop answering (the group's coordinator among them) and answer again",
    };
  return {
    pause: () => run('bash', [kafkaScript, 'pause']),
    resume: () => run('bash', [kafkaScript, 'resume']),
  };
}
