#!/usr/bin/python3
"""The matplotlib side of bench/charts.bench.ts: draws what Operon's renderer draws, the way a
Python user would (pandas to read the file, matplotlib to draw, scipy for the clustering),
from the same file, at the same pixel size, and writes a PNG.

    charts-matplotlib.py <volcano|manhattan|heatmap> <input> <output.png> <width> <height> <scale> [top_n]

Prints one JSON line: import_s (pandas, numpy, matplotlib with the Agg backend, scipy),
render_s (file read to savefig done: read + compute + draw + PNG encode + write), cpu_s (process
time over the same span), maxrss_kb
(resource.getrusage: peak of the whole process, imports included), rss_after_import_kb, the
library versions and what was drawn (points, counts).

Sizes: the figure is width/100 × height/100 inches at 100 × scale dpi, so the PNG has the
pixels of Operon's (width × scale by height × scale); font sizes are Operon's SVG pixel sizes
× 0.72 pt (one SVG pixel is 1/100 inch here), so text takes the same share of the figure.
"""
import json
import resource
import sys
import time

t_import = time.perf_counter()
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
import scipy  # noqa: E402
from scipy.cluster import hierarchy  # noqa: E402

import_s = time.perf_counter() - t_import


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


rss_after_import_kb = rss_kb()

# Okabe–Ito, as Operon's PALETTE: blue, vermillion; Operon's grey for "not significant".
BLUE, VERMILLION, GREY = "#0072B2", "#D55E00", "#9a9a9a"
PT = 0.72  # points per Operon SVG pixel at 100 px per inch
plt.rcParams.update({
    "font.family": "DejaVu Sans", "font.size": 12 * PT, "axes.titlesize": 15 * PT, "axes.titleweight": "bold",
    "axes.labelsize": 13 * PT, "xtick.labelsize": 12 * PT, "ytick.labelsize": 12 * PT, "legend.fontsize": 12 * PT,
    "axes.spines.top": False, "axes.spines.right": False,
})


def figure(width, height, scale):
    return plt.figure(figsize=(width / 100, height / 100), dpi=100 * scale)


def volcano(path, out, width, height, scale, fc_t=1.0, p_t=0.05, top_labels=15):
    df = pd.read_csv(path, index_col=0)
    df = df.dropna(subset=["log2FoldChange", "padj"])
    lfc = df["log2FoldChange"].to_numpy()
    p = df["padj"].to_numpy()
    y = -np.log10(np.where(p == 0, p[p > 0].min(), p))
    sig = p < p_t
    up = sig & (lfc >= fc_t)
    down = sig & (lfc <= -fc_t)
    ns = ~(up | down)
    fig = figure(width, height, scale)
    ax = fig.add_subplot()
    ax.scatter(lfc[ns], y[ns], s=4, c=GREY, alpha=0.45, linewidths=0, label=f"Not significant ({ns.sum():,})")
    ax.scatter(lfc[down], y[down], s=8, c=BLUE, alpha=0.8, linewidths=0, label=f"Down ({down.sum():,})")
    ax.scatter(lfc[up], y[up], s=8, c=VERMILLION, alpha=0.8, linewidths=0, label=f"Up ({up.sum():,})")
    for x in (-fc_t, fc_t):
        ax.axvline(x, color="#555", lw=0.9 * PT, ls=(0, (5, 4)))
    ax.axhline(-np.log10(p_t), color="#555", lw=0.9 * PT, ls=(0, (5, 4)))
    xmax = max(np.abs(lfc).max(), fc_t * 1.25) * 1.04
    ax.set_xlim(-xmax, xmax)
    ax.set_ylim(0, y.max() * 1.04)
    changed = np.flatnonzero(~ns)
    order = changed[np.lexsort((-np.abs(lfc[changed]), p[changed]))][:top_labels]
    for i in order:
        ax.annotate(df.index[i], (lfc[i], y[i]), xytext=(3, 3), textcoords="offset points", fontsize=10 * PT)
    ax.set_xlabel("log₂ fold change")
    ax.set_ylabel("−log₁₀ adjusted p (padj)")
    ax.set_title(f"Volcano plot — {path.rsplit('/', 1)[-1]}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, markerscale=2)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return {"points": int(len(df)), "up": int(up.sum()), "down": int(down.sum()), "ns": int(ns.sum())}


def chrom_key(c):
    c = str(c)
    return (0, int(c), "") if c.isdigit() else (1, {"X": 0, "Y": 1, "XY": 2, "MT": 3}.get(c, 9), c)


def manhattan(path, out, width, height, scale, sig_p=5e-8, sug_p=1e-5, top_labels=10, locus_bp=500_000):
    df = pd.read_csv(path, sep="\t", usecols=["SNP", "CHR", "BP", "P"], dtype={"CHR": str})
    df["y"] = -np.log10(df["P"].clip(lower=df.loc[df["P"] > 0, "P"].min()))
    chroms = sorted(df["CHR"].unique(), key=chrom_key)
    fig = figure(width, height, scale)
    ax = fig.add_subplot()
    offset, centres, gap = 0, [], 0
    x = np.empty(len(df))
    groups = df.groupby("CHR", sort=False).indices
    for j, c in enumerate(chroms):
        idx = groups[c]
        bp = df["BP"].to_numpy()[idx]
        lo, hi = bp.min(), bp.max()
        if j == 0:
            gap = 0.006 * (df.groupby("CHR")["BP"].max().sum())
        x[idx] = bp - lo + offset
        ax.scatter(x[idx], df["y"].to_numpy()[idx], s=(2 * 1.7 * PT) ** 2, c=(BLUE, "#8c8c8c")[j % 2], linewidths=0, rasterized=True)
        centres.append(offset + (hi - lo) / 2)
        offset += hi - lo + gap
    ax.axhline(-np.log10(sug_p), color="#666", lw=PT, ls=(0, (5, 4)))
    ax.axhline(-np.log10(sig_p), color=VERMILLION, lw=1.2 * PT)
    ax.text(offset - gap, -np.log10(sig_p), f"genome-wide, p = {sig_p:g}", color=VERMILLION, ha="right", va="bottom", fontsize=11 * PT)
    ax.text(offset - gap, -np.log10(sug_p), f"suggestive, p = {sug_p:g}", color="#444", ha="right", va="bottom", fontsize=11 * PT)
    # The best SNP of each genome-wide significant locus (500 kb), labelled.
    hits = df[df["P"] < sig_p].sort_values("P")
    leads = []
    for i, r in hits.iterrows():
        if not any(df.at[k, "CHR"] == r["CHR"] and abs(df.at[k, "BP"] - r["BP"]) < locus_bp for k in leads):
            leads.append(i)
    for i in leads[:top_labels]:
        ax.annotate(df.at[i, "SNP"], (x[i], df.at[i, "y"]), xytext=(4, 2), textcoords="offset points", fontsize=10 * PT)
    ax.set_xticks(centres, chroms)
    ax.set_xlim(-gap, offset)
    ax.set_ylim(0, df["y"].max() * 1.05)
    ax.set_xlabel("Chromosome")
    ax.set_ylabel("−log₁₀ p")
    ax.set_title(f"Manhattan plot — {path.rsplit('/', 1)[-1]}")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return {"points": int(len(df)), "drawn": int(len(df)), "significant": int(len(hits)), "loci": len(leads)}


def heatmap(path, out, width, height, scale, top_n=50):
    df = pd.read_csv(path, sep="\t", index_col=0)
    cpm = df / df.sum(axis=0) * 1e6
    lc = np.log2(cpm + 1)
    var = lc.var(axis=1, ddof=1)
    top = lc.loc[var.nlargest(top_n).index.sort_values()]
    top = top.loc[[g for g in lc.index if g in set(top.index)]]  # the file's order, as Operon
    z = top.sub(top.mean(axis=1), axis=0).div(top.std(axis=1, ddof=1), axis=0).to_numpy()
    row_link = hierarchy.linkage(z, method="average", metric="euclidean")
    col_link = hierarchy.linkage(z.T, method="average", metric="euclidean")
    lim = max(1.0, min(3.0, np.ceil(np.abs(z).max() * 2) / 2))
    fig = figure(width, height, scale)
    label_rows = len(z) <= 150
    right = 0.72 if label_rows else 0.86  # room right of the cells for gene labels and the colour bar
    top_px, bottom_px = 95, 70  # title block; sample labels underneath
    top_f, bottom_f = 1 - top_px / height, bottom_px / height
    dendro_f = 56 / (height - top_px - bottom_px)  # the column dendrogram, 56 px tall as Operon's
    gs = fig.add_gridspec(2, 3, width_ratios=[0.09, right - 0.09, 1 - right], height_ratios=[dendro_f, 1 - dendro_f],
                          left=0.015, right=0.985, top=top_f, bottom=bottom_f, wspace=0.01, hspace=0.01)
    ax_rd = fig.add_subplot(gs[1, 0])
    ax_cd = fig.add_subplot(gs[0, 1])
    ax = fig.add_subplot(gs[1, 1])
    with plt.rc_context({"lines.linewidth": 0.8 * PT}):
        rd = hierarchy.dendrogram(row_link, orientation="left", ax=ax_rd, no_labels=True, color_threshold=0, above_threshold_color="#444")
        cd = hierarchy.dendrogram(col_link, ax=ax_cd, no_labels=True, color_threshold=0, above_threshold_color="#444")
    for a in (ax_rd, ax_cd):
        a.set_axis_off()
    ax_rd.set_ylim(10 * len(z), 0)  # leaf k sits at 10k + 5: rows top to bottom as imshow draws them
    ax_cd.set_xlim(0, 10 * z.shape[1])
    rows, cols = rd["leaves"], cd["leaves"]
    im = ax.imshow(z[np.ix_(rows, cols)], aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
    ax.set_xticks(range(len(cols)), df.columns[cols], rotation=90, fontsize=min(12, 0.85 * ax.bbox.width / scale / len(cols)) * PT)
    if label_rows:
        ax.yaxis.tick_right()
        ax.set_yticks(range(len(rows)), top.index[rows], fontsize=min(12, 0.85 * ax.bbox.height / scale / len(rows)) * PT)
    else:
        ax.set_yticks([])
    ax.tick_params(length=0)
    cax = fig.add_axes([0.875 if label_rows else right + 0.03, top_f - 180 / height, 0.018, 170 / height])
    fig.colorbar(im, cax=cax, ticks=range(-int(lim), int(lim) + 1))
    cax.set_title("z-score\n(log2 CPM+1)", fontsize=11 * PT, loc="left")
    fig.suptitle(f"Heatmap — {path.rsplit('/', 1)[-1]}", y=1 - 8 / height, va="top", fontsize=15 * PT, fontweight="bold")
    fig.text(0.5, 1 - 40 / height, f"Top {len(z)} most variable genes; per-gene z-scores of log2(CPM + 1)", ha="center", fontsize=11 * PT, color="#444")
    fig.savefig(out)
    plt.close(fig)
    return {"points": int(z.size), "genes": int(len(z)), "samples": int(z.shape[1])}


def main():
    kind, path, out, width, height, scale = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    t0, c0 = time.perf_counter(), time.process_time()
    if kind == "volcano":
        info = volcano(path, out, width, height, scale)
    elif kind == "manhattan":
        info = manhattan(path, out, width, height, scale)
    elif kind == "heatmap":
        info = heatmap(path, out, width, height, scale, int(sys.argv[7]) if len(sys.argv) > 7 else 50)
    else:
        raise SystemExit(f"unknown chart {kind}")
    render_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({
        "import_s": import_s, "render_s": render_s, "cpu_s": cpu_s,
        "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "rss_after_import_kb": rss_after_import_kb,
        "python": sys.version.split()[0], "matplotlib": matplotlib.__version__, "numpy": np.__version__,
        "pandas": pd.__version__, "scipy": scipy.__version__, **info,
    }))


if __name__ == "__main__":
    main()
