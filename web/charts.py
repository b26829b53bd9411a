"""The usage page's charts: model calls along the current branch, and each branch's totals, as inline SVG."""

from __future__ import annotations

import html
import math
from typing import Any


def e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _ticks(top: float, count: int = 4) -> list[float]:
    """Round axis steps up to ``top``."""
    if top <= 0:
        return [0.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [step * i for i in range(int(top // step) + 1)]


def _short(n: float) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e4 else f"{n / 1e3:.1f}k" if n >= 1e3 else f"{n:g}"


MAX_BARS = 400  # bars the calls chart draws at most


def calls_chart(u: dict[str, Any]) -> str:
    """Tokens of each model call along the current branch (stacked: input, cache, output), the running cost as a
    line on its own scale, and each compaction as a marked rule."""
    calls = u["calls"]
    if not calls:
        return '<p class="dim">No model call on the current branch reported its usage.</p>'
    per = -(-len(calls) // MAX_BARS)  # past MAX_BARS calls, neighbours share a bar (their sums)
    if per > 1:
        calls = [{"id": group[-1]["id"], "model": f"calls {n * per + 1}-{n * per + len(group)}",
                  **{k: sum(c[k] for c in group) for k in ("input", "cache", "output", "cost")}}
                 for n, group in enumerate(calls[i:i + per] for i in range(0, len(calls), per))]
        u = {**u, "compactions": [{**m, "after_call": -(-m["after_call"] // per)} for m in u["compactions"]]}
    width, height, left, right, top, bottom = 960, 300, 56, 64, 16, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(c["input"] + c["cache"] + c["output"] for c in calls) or 1
    ticks = _ticks(peak)
    peak = max(peak, ticks[-1])
    total_cost = sum(c["cost"] for c in calls) or 1.0
    slot = plot_w / len(calls)
    bar = max(1.0, min(28.0, slot * 0.7))
    out = [f'<svg id="calls-chart" class="chart" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="tokens and cost of each model call along the current branch">']
    for t in ticks:
        y = top + plot_h - t / peak * plot_h
        out.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="axis" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_short(t)}</text>')
    running = 0.0
    points = []
    for n, c in enumerate(calls):
        x = left + slot * n + (slot - bar) / 2
        y = top + plot_h
        for kind in ("input", "cache", "output"):
            h = c[kind] / peak * plot_h
            y -= h
            if h > 0:
                out.append(f'<rect class="bar {kind}" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}"/>')
        running += c["cost"]
        points.append(f"{left + slot * n + slot / 2:.1f},{top + plot_h - running / total_cost * plot_h:.1f}")
        out.append(f'<rect class="hit" data-entry="{e(c["id"])}" x="{left + slot * n:.1f}" y="{top}" width="{slot:.1f}" '
                   f'height="{plot_h}"><title>{f"call {n + 1} · " if per == 1 else ""}{e(c["id"])} · {e(c["model"])}\n'
                   f'input {c["input"]:,} · cache {c["cache"]:,} · output {c["output"]:,}\n'
                   f'${c["cost"]:.4f} (running ${running:.4f})</title></rect>')
    out.append(f'<polyline class="cost-line" points="{" ".join(points)}"/>')
    for t in (0.0, 0.5, 1.0):
        y = top + plot_h - t * plot_h
        out.append(f'<text class="axis cost" x="{width - right + 6}" y="{y + 4:.1f}">${total_cost * t:.4f}</text>')
    for m in u["compactions"]:
        x = left + slot * m["after_call"]
        before = f' ({m["tokens_before"]:,} tokens before)' if m["tokens_before"] is not None else ""
        out.append(f'<g class="compaction-mark" data-entry="{e(m["id"])}"><line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" '
                   f'y2="{top + plot_h}"/><text x="{x + 4:.1f}" y="{top + 12}">compaction</text>'
                   f'<title>compaction {e(m["id"])}{e(before)}</title></g>')
    step = max(1, len(calls) // 12)
    for n in range(0, len(calls), step):
        out.append(f'<text class="axis" x="{left + slot * n + slot / 2:.1f}" y="{top + plot_h + 16}" '
                   f'text-anchor="middle">{n * per + 1}</text>')
    out.append(f'<text class="axis" x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">model call '
               f'along the current branch{f" ({per} calls a bar)" if per > 1 else ""}</text></svg>')
    legend = ('<p class="chart-legend"><span class="key input"></span>input <span class="key cache"></span>cache '
              '<span class="key output"></span>output <span class="key cost-line"></span>running cost (right scale) '
              '<span class="key compaction-mark"></span>compaction</p>')
    return "".join(out) + legend


def branches_chart(u: dict[str, Any]) -> str:
    """Each branch's total tokens as a bar: the part it shares with the current branch, then its own."""
    branches = u["branches"]
    if not branches:
        return '<p class="dim">No branches.</p>'
    row, left, right, width = 30, 300, 150, 960
    height = row * len(branches) + 24
    peak = max(b["tokens"] for b in branches) or 1
    out = [f'<svg id="branches-chart" class="chart" viewBox="0 0 {width} {height}" role="img" '
           'aria-label="total tokens of each branch">']
    for n, b in enumerate(branches):
        y = 8 + n * row
        shared = (b["tokens"] - b["own_tokens"]) / peak * (width - left - right)
        own = b["own_tokens"] / peak * (width - left - right)
        name = f'{b["tip"]} · {b["text"][:34]}'
        out.append(f'<g class="branch{" current" if b["current"] else ""}" data-tip="{e(b["tip"])}">'
                   f'<text class="axis name" x="{left - 8}" y="{y + 15}" text-anchor="end">{e(name)}</text>'
                   f'<rect class="bar shared" x="{left}" y="{y}" width="{shared:.1f}" height="{row - 10}"/>'
                   f'<rect class="bar own" x="{left + shared:.1f}" y="{y}" width="{own:.1f}" height="{row - 10}"/>'
                   f'<text class="axis value" x="{left + shared + own + 6:.1f}" y="{y + 15}">{b["tokens"]:,} · '
                   f'${b["cost"]:.4f}</text><title>{e(b["tip"])}: {b["tokens"]:,} tokens, ${b["cost"]:.4f} '
                   f'({b["own_tokens"]:,} tokens, ${b["own_cost"]:.4f} of them off the current branch)</title></g>')
    out.append("</svg>")
    legend = ('<p class="chart-legend"><span class="key shared"></span>shared with the current branch '
              '<span class="key own"></span>its own <b>bold</b>: the current branch</p>')
    return "".join(out) + legend
