export { DedupWindow, type DedupWindowOptions } from './dedup-window.js';
