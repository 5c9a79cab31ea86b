/**
 * The console's browser tests' shared parts: one headless Debian chromium (playwright-core; installed by
 * scripts/browser.sh) per file, pages whose `goto` takes a console path, the secret scan, axe-core run in
 * the page, the form POST of the browser's own request context, a `data-field` reader, and where the
 * screenshots go (.dev/console-screens/, and docs/images/ with REDFENCE_CONSOLE_SCREENSHOTS=docs).
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { SECRET_KEY, SECRET_VALUE, type World } from './fixture.js';

const ROOT = join(import.meta.dirname, '..', '..');
const SCREENS = join(ROOT, '.dev', 'console-screens');
const DOCS = join(ROOT, 'docs', 'images');
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** The views whose screenshots README.md shows (docs/images/console-<view>.png). */
export const README_VIEWS = new Set([
  'instances',
  'lag',
  'processing',
  'dead-letters',
  'inspector',
  'outbox',
]);

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launch(): Promise<Browser> {
  mkdirSync(SCREENS, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), 'rf-console-chromium-'));
  // a fresh --user-data-dir (playwright passes it itself)
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    timeout: 60_000,
    viewport: { width: 1200, height: 800 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export async function newPage(b: Browser, w: { console: { url: string } }): Promise<Page> {
  const page = await b.context.newPage();
  const base = w.console.url.replace(/\/$/, '');
  const goto = page.goto.bind(page);
  page.goto = (path: string, o?: Parameters<Page['goto']>[1]) => goto(base + path, o);
  page.setDefaultTimeout(30_000);
  page.on('dialog', (d) => void d.accept());
  return page;
}

/**
 * A screenshot to .dev/console-screens/<name>.png; with REDFENCE_CONSOLE_SCREENSHOTS=docs, the README's
 * views also to docs/images/console-<name>.png (the viewport only: 1200x800, small files).
 */
export async function screenshot(page: Page, name: string): Promise<void> {
  const path = join(SCREENS, `${name}.png`);
  const docs = process.env.REDFENCE_CONSOLE_SCREENSHOTS === 'docs' && README_VIEWS.has(name);
  await page.screenshot({ path, fullPage: !docs });
  if (docs) {
    mkdirSync(DOCS, { recursive: true });
    copyFileSync(path, join(DOCS, `console-${name}.png`));
  }
}

/** The page's HTML holds none of the test's secrets. */
export async function noSecrets(page: Page, w: World, where: string, more: string[] = []): Promise<void> {
  const content = await page.content();
  for (const secret of [w.redisPassword, w.token, SECRET_KEY, SECRET_VALUE, ...more])
    assert.ok(!content.includes(secret), `${where} shows a secret`);
}

/** axe-core run in the page (evaluated, not injected as a script tag: the CSP allows none). */
export async function axeSerious(page: Page): Promise<string[]> {
  await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as {
        axe: {
          run: (c: unknown) => Promise<{ violations: Array<{ id: string; impact: string; help: string }> }>;
        };
      }
    ).axe;
    const r = await axe.run((globalThis as unknown as { document: unknown }).document);
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help }));
  });
  return found
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help}`);
}

/** A POST of the browser's own request context (its cookies, no page). */
export const post = (
  b: Browser,
  w: World,
  path: string,
  o: Parameters<BrowserContext['request']['post']>[1],
) => b.context.request.post(w.console.url.replace(/\/$/, '') + path, o);

export const text = (l: { textContent(): Promise<string | null> }) =>
  l.textContent().then((x) => (x ?? '').trim());

export const field = (page: Page, name: string) => text(page.locator(`[data-field="${name}"]`).first());
