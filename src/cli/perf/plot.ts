// --plot: a dependency-free SVG line chart of bandwidth or latency against message size
// (log2 x axis), with the baseline as a second line when it was measured.

export interface Series {
  name: string;
  points: { x: number; y: number }[];
  color: string;
}

export function svgPlot(title: string, yLabel: string, series: Series[]): string {
  const W = 720;
  const H = 420;
  const m = { l: 70, r: 20, t: 40, b: 50 };
  const all = series.flatMap((s) => s.points);
  const xs = all.map((p) => Math.log2(p.x));
  const xMin = Math.min(...xs);
  const xMax = Math.max(...xs, xMin + 1);
  const yMax = Math.max(...all.map((p) => p.y), 1e-9) * 1.1;
  const px = (x: number) => m.l + ((Math.log2(x) - xMin) / (xMax - xMin)) * (W - m.l - m.r);
  const py = (y: number) => H - m.b - (y / yMax) * (H - m.t - m.b);
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${esc(title)}</text>`);
  out.push(`<line x1="${m.l}" y1="${H - m.b}" x2="${W - m.r}" y2="${H - m.b}" stroke="black"/>`);
  out.push(`<line x1="${m.l}" y1="${m.t}" x2="${m.l}" y2="${H - m.b}" stroke="black"/>`);
  for (let e = Math.ceil(xMin); e <= xMax; e += 2) {
    const x = px(2 ** e);
    out.push(`<line x1="${x}" y1="${H - m.b}" x2="${x}" y2="${H - m.b + 5}" stroke="black"/>`);
    out.push(`<text x="${x}" y="${H - m.b + 18}" text-anchor="middle">${fmtSize(2 ** e)}</text>`);
  }
  for (let i = 0; i <= 5; i++) {
    const v = (yMax / 5) * i;
    const y = py(v);
    out.push(`<line x1="${m.l - 5}" y1="${y}" x2="${W - m.r}" y2="${y}" stroke="#ddd"/>`);
    out.push(`<text x="${m.l - 8}" y="${y + 4}" text-anchor="end">${v >= 100 ? v.toFixed(0) : v.toPrecision(3)}</text>`);
  }
  out.push(`<text x="${W / 2}" y="${H - 12}" text-anchor="middle">message size [bytes]</text>`);
  out.push(`<text transform="translate(16 ${H / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`);
  series.forEach((s, i) => {
    const d = s.points.map((p, j) => `${j === 0 ? 'M' : 'L'}${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`).join(' ');
    out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"/>`);
    for (const p of s.points) out.push(`<circle cx="${px(p.x).toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="3" fill="${s.color}"/>`);
    out.push(`<rect x="${m.l + 12}" y="${m.t + 8 + i * 18}" width="12" height="3" fill="${s.color}"/>`);
    out.push(`<text x="${m.l + 30}" y="${m.t + 13 + i * 18}">${esc(s.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

function fmtSize(n: number): string {
  if (n >= 1 << 20) return `${n / (1 << 20)}M`;
  if (n >= 1 << 10) return `${n / (1 << 10)}K`;
  return String(n);
}

function esc(s: string): string {
  return s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
}
