export {
  type ConsumeOptions,
  type RateLimit,
  RateLimiter,
  type RateLimiterOptions,
  type RateLimitResult,
} from './rate-limiter.js';
