"""The evidence's plots, as PNG files (matplotlib, headless), drawn from evidence.json's rows only:
the A/A SpecScores against 1; each calibrated gate's statistic with its 95% interval for every
honest run and control, with the limit drawn; the cache hit achieved against the data card's
targets over the m/c grid (when the fit ran)."""

from __future__ import annotations

from pathlib import Path

GATE_TITLES = {
    "greedy_agreement": "greedy agreement (floor)",
    "sampled_likelihood": "sampled likelihood D (bound)",
    "first_choice": "first-choice share D (bound)",
    "target_fidelity": "target fidelity (ceiling)",
}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_plots(evidence: dict, out: Path) -> dict[str, str]:
    """Write the plots into `out`; return {plot name: file name}."""
    out.mkdir(parents=True, exist_ok=True)
    written = {"aa_specscores": _aa(evidence, out / "aa_specscores.png"), "gates": _gates(evidence, out / "gates.png")}
    if evidence.get("fit"):
        written["cache_fit"] = _fit(evidence["fit"], out / "cache_fit.png")
    return written


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    _plt().close(fig)
    return path.name


def _aa(evidence: dict, path: Path) -> str:
    plt = _plt()
    scores = [s for s in evidence["aa_specscores"] if s is not None]
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.axhline(1.0, color="black", lw=1, label="1 (the stock engine against itself)")
    ax.plot(range(1, len(scores) + 1), scores, "o", color="tab:blue", label="A/A SpecScore")
    noise = evidence["speed_noise"]
    if noise.get("max_abs_error") is not None:
        m = noise["max_abs_error"]
        ax.axhspan(1 - m, 1 + m, color="tab:blue", alpha=0.1, label=f"max |SpecScore - 1| = {m:.4f}")
    ax.set_xlabel("A/A run")
    ax.set_ylabel("SpecScore")
    ax.set_title(f"{evidence['task_id']}: A/A runs (candidate v{evidence['candidate_version']})", fontsize=9)
    ax.legend(fontsize=7)
    return _save(fig, path)


def _gates(evidence: dict, path: Path) -> str:
    plt = _plt()
    rows = evidence["gate_rows"]
    limits = evidence["limits"]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, gate in zip(axes.ravel(), GATE_TITLES):
        g = [r for r in rows if r["gate"] == gate and r["statistic"] is not None]
        names = [r["name"] for r in g]
        for i, r in enumerate(g):
            color = "tab:green" if r["honest"] else "tab:red"
            lo, hi = r.get("ci_low"), r.get("ci_high")
            if lo is not None and hi is not None:
                ax.errorbar(
                    r["statistic"],
                    i,
                    xerr=[[r["statistic"] - lo], [hi - r["statistic"]]],
                    fmt="o",
                    color=color,
                    capsize=3,
                )
            else:
                ax.plot(r["statistic"], i, "o", color=color)
        key = {
            "greedy_agreement": "greedy_agreement_floor",
            "sampled_likelihood": "likelihood_bound",
            "first_choice": "first_choice_bound",
            "target_fidelity": "fidelity_ceiling",
        }[gate]
        lim = limits.get(key)
        if lim is not None:
            ax.axvline(lim, color="black", ls="--", lw=1)
            if gate in ("sampled_likelihood", "first_choice"):
                ax.axvline(-lim, color="black", ls="--", lw=1)
        if gate == "target_fidelity" and g and all((r["statistic"] or 0) >= 0 for r in g):
            ax.set_xscale("symlog", linthresh=max(1e-7, (lim or 1e-6) / 10))
            ax.set_xlim(left=0)
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names, fontsize=7)
        ax.set_title(f"{GATE_TITLES[gate]}: {'none' if lim is None else f'{lim:.4g}'}", fontsize=9)
    fig.suptitle(
        f"{evidence['task_id']}: gate statistics with 95% intervals (green honest, red controls), "
        f"limits of candidate v{evidence['candidate_version']} dashed",
        fontsize=9,
    )
    return _save(fig, path)


def _fit(fit: dict, path: Path) -> str:
    plt = _plt()
    grid = fit["grid"]
    names = list(fit["targets"])
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.2), squeeze=False)
    ms = sorted({p["m"] for p in grid})
    for ax, name in zip(axes[0], names):
        for m in ms:
            pts = sorted(
                (p["c"], p["achieved"].get(name)) for p in grid if p["m"] == m and p["achieved"].get(name) is not None
            )
            if pts:
                ax.plot([c for c, _ in pts], [v for _, v in pts], "o-", label=f"m {m}")
        ax.axhline(fit["targets"][name], color="black", ls="--", lw=1, label="target")
        ax.plot([fit["c"]], [fit["achieved"].get(name)], "*", color="red", ms=12, label="chosen")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("think-time scale c")
        ax.set_title(name.replace("_", " "), fontsize=9)
        ax.legend(fontsize=6)
    fig.suptitle(f"stock engine's cache hit over the m/c grid: chosen m {fit['m']}, c {fit['c']}", fontsize=9)
    return _save(fig, path)
