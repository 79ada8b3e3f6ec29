"""One figure per workload that shows where policies differ.

Below ~80 % arrived every policy but Random places almost everything, so the
allocation panel covers 80–130 % arrived only; a second panel shows each
policy's allocation minus FGD's on the same seeds (pp), where differences of a
few tenths are visible, with the 95 % interval of that mean difference (where it
leaves 0, the difference is more than the seeds' noise); the third is the FGD
paper's fragmentation ratio against load. Other lines are means over seeds, bands
± one sd.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pyextender.simulate.runs import Run, t975

ZOOM = (80, 130)
"""Arrived workload shown in the allocation panels (% of cluster GPUs)."""
REFERENCE = "fgd"
SATURATED = 90
"""From here on (% arrived) allocation is flat: its range sets the allocation panel's y axis."""
FRAG_HI = 100
"""Frag ratio panel up to this load (% arrived): beyond it every policy sits near 99 %."""


def _band(runs: list[Run], curve: str) -> tuple[Any, Any]:
    stack = np.stack([getattr(r.curves, curve) for r in runs])
    mean = np.nanmean(stack, axis=0)
    sd = np.nanstd(stack, axis=0, ddof=1) if stack.shape[0] > 1 else np.zeros_like(mean)
    return mean, sd


def _paired_diff(runs: list[Run], ref: list[Run], curve: str = "alloc") -> tuple[Any, Any]:
    """Mean over seeds of (policy − reference) ``curve``, seed by seed (the same
    arrivals), and the half-width of its 95 % interval (Student's t, as the table's
    verdicts; 0 with one seed): where the band leaves 0, the difference is real."""
    by_seed = {r.seed: getattr(r.curves, curve) for r in ref}
    diffs = [getattr(r.curves, curve) - by_seed[r.seed] for r in runs if r.seed in by_seed]
    if not diffs:
        nan = np.full(131, np.nan)
        return nan, nan
    stack = np.stack(diffs)
    n = stack.shape[0]
    if n > 1:
        half = t975(n) * np.nanstd(stack, axis=0, ddof=1) / np.sqrt(n)
    else:
        half = np.zeros(stack.shape[1])
    return np.nanmean(stack, axis=0), half


def alloc_ylim(ymin: float, ymax: float) -> tuple[float, float]:
    """y range of the allocation panel: the policies' own range once saturated, padded.
    With the ideal line's 100 % in view, differences of a few tenths of a pp between
    policies were a few pixels."""
    pad = max(0.15 * (ymax - ymin), 0.1)
    return max(ymin - pad, 0.0), min(ymax + pad, 100.5)


def plot_workload(workload: str, by_policy: dict[str, list[Run]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_a, ax_d, ax_f) = plt.subplots(1, 3, figsize=(17, 5))
    # the ratio curves of all policies overlap at full scale: an inset shows each
    # policy's ratio minus the reference's (same seeds) up to FRAG_HI % arrived
    ax_i = ax_f.inset_axes((0.1, 0.5, 0.5, 0.42))
    inset = slice(0, FRAG_HI + 1)
    x = np.arange(131)
    lo, hi = ZOOM
    zoom = slice(lo, hi + 1)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    ref = by_policy.get(REFERENCE)
    seeds = max(len(r) for r in by_policy.values())
    ymin, ymax = 100.0, 0.0
    for i, (name, runs) in enumerate(by_policy.items()):
        color = colors[i % len(colors)]
        width = 2.4 if name == "pyextender" else 1.4
        mean, sd = _band(runs, "alloc")
        ymin = min(ymin, float(np.nanmin(mean[SATURATED : hi + 1])))
        ymax = max(ymax, float(np.nanmax(mean[SATURATED : hi + 1])))
        ax_a.plot(x[zoom], mean[zoom], color=color, lw=width, label=f"{name} ({len(runs)} seeds)")
        ax_a.fill_between(x[zoom], (mean - sd)[zoom], (mean + sd)[zoom], color=color, alpha=0.15)
        if ref:
            diff, dsd = _paired_diff(runs, ref)
            ax_d.plot(x[zoom], diff[zoom], color=color, lw=width, label=name)
            ax_d.fill_between(
                x[zoom], (diff - dsd)[zoom], (diff + dsd)[zoom], color=color, alpha=0.12
            )
        f_mean, f_sd = _band(runs, "frag_ratio")
        ax_f.plot(x, f_mean, color=color, lw=width, label=name)
        ax_f.fill_between(x, f_mean - f_sd, f_mean + f_sd, color=color, alpha=0.15)
        if ref:
            f_diff, _ = _paired_diff(runs, ref, "frag_ratio")
            ax_i.plot(x[inset], f_diff[inset], color=color, lw=width)
    ax_a.plot(x[zoom], np.minimum(x[zoom], 100), color="grey", ls=":", label="ideal")
    ax_a.set_xlim(lo, hi)
    ax_a.set_ylim(*alloc_ylim(ymin, ymax))
    ax_a.set_xlabel("arrived GPU demand, % of cluster GPUs")
    ax_a.set_ylabel("allocated GPUs, % of cluster GPUs")
    ax_a.set_title("allocation (80–130 % arrived)")
    ax_d.axhline(0.0, color="grey", lw=0.8)
    ax_d.set_xlim(lo, hi)
    ax_d.set_xlabel("arrived GPU demand, % of cluster GPUs")
    ax_d.set_ylabel(f"allocated minus {REFERENCE}'s, pp")
    ax_d.set_title(f"difference to {REFERENCE}, same seeds (band: 95 % interval)")
    ax_f.set_xlim(0, FRAG_HI)
    ax_f.set_ylim(0, 100)
    ax_i.set_xlim(0, FRAG_HI)
    ax_i.tick_params(labelsize=7)
    ax_i.set_title(f"minus {REFERENCE}'s, pp (same seeds)", fontsize=8)
    ax_i.axhline(0.0, color="grey", lw=0.8)
    ax_i.grid(alpha=0.3)
    ax_f.set_xlabel("arrived GPU demand, % of cluster GPUs")
    ax_f.set_ylabel("fragmentation ratio, % of idle GPU milli")
    ax_f.set_title("fragmentation ratio vs load (FGD measure)")
    for ax in (ax_a, ax_d, ax_f):
        ax.grid(alpha=0.3)
    ax_a.legend(loc="best", fontsize=8)
    if not ref:
        ax_d.text(0.5, 0.5, f"no {REFERENCE} runs", ha="center", transform=ax_d.transAxes)
    fig.suptitle(f"openb trace replay: {workload} (mean over up to {seeds} seeds per policy)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
