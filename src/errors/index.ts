export { ERROR_CODES, type ErrorCode } from './codes.js';
export { RedfenceError, type RedfenceErrorOptions } from './redfence-error.js';
