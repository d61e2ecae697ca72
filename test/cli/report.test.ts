// `sabre perf --report`: the page is self-contained (no request leaves it), and in a real
// headless Chromium (Debian's, driven by playwright-core) its tables are there and every chart
// is drawn — canvases with ink on them, a log2 size axis, sabre and the baseline in the legend.
// Skips, saying why, where Chromium is not installed (apt-get install chromium).
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { chartSpecs } from '../../src/cli/perf/report-html.js';
import { sabre } from './helpers.js';

const CHROMIUM = process.env.SABRE_CHROMIUM ?? '/usr/bin/chromium';
const missing = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} not found (apt-get install chromium, or set SABRE_CHROMIUM)`;
if (missing) console.warn(`report.test: skipping the browser checks: ${missing}`);

const dir = mkdtempSync(join(tmpdir(), 'sabre-report-'));

function report(name: string, args: string[]): { file: string; json: { results: { source: string }[] } } {
  const file = join(dir, `${name}.html`);
  const r = sabre(['perf', ...args, '--report', file, '--json'], 120_000);
  if (r.code !== 0) throw new Error(`sabre perf ${args.join(' ')}: ${r.stderr}`);
  return { file, json: JSON.parse(r.stdout) };
}

describe('the HTML report', () => {
  it('is one self-contained file: uPlot and the data inlined, nothing fetched', () => {
    const { file, json } = report('bw-inproc', ['write_bw', '--transport', 'inproc', '-a', '-n', '20', '--baseline']);
    const html = readFileSync(file, 'utf8');
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('leeoniya/uPlot');
    expect(html).not.toMatch(/<(link|img|iframe)\b/i);
    expect(html).not.toMatch(/\ssrc=/i);
    expect(html).not.toMatch(/https?:\/\/(?!github\.com\/leeoniya)/);
    const specs = chartSpecs(JSON.parse(/<script type="application\/json" id="sabre-data">(.*?)<\/script>/s.exec(html)![1]!).report);
    expect(specs.sizes).toEqual(Array.from({ length: 23 }, (_, i) => 2 << i));
    expect(specs.charts.map((c) => c.id)).toEqual(['bw', 'rate', 'cpu']);
    expect(specs.charts[0]!.series.map((s) => s.label)).toEqual(['sabre BW average', 'sabre BW peak', 'Uint8Array.set BW average', 'Uint8Array.set BW peak']);
    expect(json.results).toHaveLength(46);
  });
});

describe.skipIf(missing !== undefined)('the HTML report in headless Chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  async function open(file: string) {
    const page = await browser.newPage({ viewport: { width: 1100, height: 1600 } });
    const errors: string[] = [];
    const requests: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(pathToFileURL(file).href);
    await page.waitForSelector('body[data-charts-ready]', { timeout: 15_000 });
    return { page, errors, requests };
  }

  /** Per chart: canvas size, pixels with ink, x/y scale kinds, legend labels, x range. */
  const inspect = () =>
    (window as unknown as { __sabreCharts: { root: HTMLElement; scales: Record<string, { distr: number; log: number; min: number; max: number }> }[] }).__sabreCharts.map((u) => {
      const canvas = u.root.querySelector('canvas')!;
      const ctx = canvas.getContext('2d')!;
      const px = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      let ink = 0;
      for (let i = 3; i < px.length; i += 4) if (px[i]! > 0) ink++;
      return {
        width: canvas.width,
        height: canvas.height,
        ink,
        x: { distr: u.scales.x!.distr, log: u.scales.x!.log, min: u.scales.x!.min, max: u.scales.x!.max },
        y: { distr: u.scales.y!.distr },
        legend: Array.from(u.root.querySelectorAll('.u-legend .u-label')).map((e) => e.textContent),
        title: u.root.querySelector('.u-title')?.textContent,
      };
    });

  it('bandwidth: header, 46 rows, three charts drawn on a log2 size axis with the baseline beside sabre', async () => {
    const { file } = report('bw-udp', ['write_bw', '--transport', 'udp', '-a', '-n', '5', '--baseline']);
    const { page, errors, requests } = await open(file);
    try {
      expect(errors).toEqual([]);
      expect(requests.filter((u) => !u.startsWith('file:'))).toEqual([]);
      expect(await page.title()).toBe('sabre perf: RDMA_Write BW Test (udp, RC)');
      expect(await page.locator('#header').innerText()).toMatch(/transport\s+udp/);
      expect(await page.locator('#results tbody tr').count()).toBe(46);
      expect(await page.locator('#results tbody tr.baseline').count()).toBe(23);
      const charts = await page.evaluate(inspect);
      expect(charts.map((c) => c.title)).toEqual(['Bandwidth', 'Message rate', 'CPU per GB moved (both processes, user + system)']);
      for (const c of charts) {
        expect(c.width).toBeGreaterThan(300);
        expect(c.ink, `${c.title}: nothing drawn`).toBeGreaterThan(2000);
        expect(c.x.distr, 'log x axis').toBe(3);
        expect(c.x.log).toBe(2);
        expect(c.x.min).toBeLessThanOrEqual(2);
        expect(c.x.max).toBeGreaterThanOrEqual(1 << 23);
      }
      expect(charts[0]!.legend).toEqual(expect.arrayContaining(['sabre BW average', 'sabre BW peak', 'node:dgram BW average']));
      await page.screenshot({ path: join(dir, 'bw-udp.png'), fullPage: true });
    } finally {
      await page.close();
    }
  }, 180_000);

  it('latency: percentile chart with sabre and the baseline', async () => {
    const { file } = report('lat-tcp', ['read_lat', '--transport', 'tcp', '-s', '4096', '-n', '50', '--baseline']);
    const { page, errors } = await open(file);
    try {
      expect(errors).toEqual([]);
      expect(await page.locator('#results tbody tr').count()).toBe(2);
      const [c] = await page.evaluate(inspect);
      expect(c!.title).toBe('Latency percentiles');
      expect(c!.ink).toBeGreaterThan(1000);
      expect(c!.x.distr).toBe(3);
      expect(c!.y.distr).toBe(3);
      expect(c!.legend).toEqual(['bytes', 'sabre t_min', 'sabre t_typical', 'sabre 99%', 'sabre 99.9%', 'node:net t_typical', 'node:net 99%']);
      await page.screenshot({ path: join(dir, 'lat-tcp.png'), fullPage: true });
    } finally {
      await page.close();
    }
  }, 120_000);
});
