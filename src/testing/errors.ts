/**
 * The error a memory port raises where the real client raises its own (a timed-out message, a refused
 * commit, a fenced producer): `code` as the broker names it, `retriable` and `fatal` as the client
 * sets them, so the code under test sees the shapes it sees in production.
 */
export class MemoryKafkaError extends Error {
  override readonly name = 'MemoryKafkaError';
  readonly code: string;
  readonly retriable: boolean;
  readonly fatal: boolean;

  constructor(code: string, message: string, options: { retriable?: boolean; fatal?: boolean } = {}) {
    super(`Kafka: ${message}`);
    this.code = code;
    this.fatal = options.fatal ?? false;
    this.retriable = !this.fatal && (options.retriable ?? true);
  }
}
