"""``ptogym patterns``: list, show and graph the pattern cards.

    ptogym patterns [--tag T] [--flow V,C] [--json]   cards, one line each (JSON list with --json)
    ptogym patterns show ID                            one card, its operators and their measured figures
    ptogym patterns graph [--plot F.png]               depends_on / used_by edges (drawn with --plot)

Ends with ``[PATTERNS_OK]`` (exit 0) or ``[PATTERNS_ERROR]`` (exit 2: unknown id,
no card matches, a broken card or card/operator mismatch, no matplotlib for
--plot).  With ``--json`` the verdict goes to stderr so stdout stays JSON.
"""
from __future__ import annotations

import json
import sys

from ptogym._io import save_figure, write_failure

from . import CardError, check_library, edges, load_cards, load_measured, operator_claims, select

OK, ERROR = "[PATTERNS_OK]", "[PATTERNS_ERROR]"


def _list(cards, args) -> int:
    chosen = select(cards, args.tag, args.flow)
    if args.json:
        print(json.dumps([card.to_json() for card in chosen], indent=1))
    else:
        for card in chosen:
            print(f"{card.id:<6} {'-'.join(card.flow_pattern):<14} {card.title:<40} "
                  f"used by: {', '.join(card.used_by) or '-'}")
    if not chosen:
        print(f"no card matches tag={args.tag!r} flow={args.flow!r}", file=sys.stderr if args.json else sys.stdout)
        return 2
    return 0


def _measured_lines(op: str, measured: dict) -> list[str]:
    lines = []
    for level, row in sorted(measured.get(op, {}).items()):
        default = row["default"]
        text = f"  {op} {level}: {default['us']:.1f} us"
        if "tflops" in default:
            text += f", {default['tflops']:.1f} TFLOPS ({default['percent_of_cube_peak']:.1f}% of cube peak)"
        text += f", {default['gbps']:.0f} GB/s ({default['percent_of_ddr']:.0f}% of nominal DDR)"
        if "upstream" in row:
            text += f"; upstream config {row['upstream']['us']:.1f} us"
        if "chain" in row:
            chain = row["chain"]
            text += f"; chain of atoms {chain['us']:.1f} us (fused {chain['fused_speedup']:.2f}x)"
            if "kernel_us" in chain:
                text += (f", whole kernels {default['kernel_us']:.1f} against {chain['kernel_us']:.1f} us "
                         f"(fused {chain['fused_kernel_speedup']:.2f}x)")
        lines.append(text)
    return lines


def _show(cards, card_id: str) -> int:
    card = cards.get(card_id.upper())
    if card is None:
        print(f"unknown pattern {card_id!r}; known: {', '.join(cards)}")
        return 2
    print(card.path.read_text(encoding="utf-8").rstrip())
    measured = load_measured()
    print("\n## Operators and their latest measured figures (pypto 0.2.0 cost model)\n")
    for op in card.used_by:
        print("\n".join(_measured_lines(op, measured) or [
            f"  {op}: not in measured.json (benchmarks/bench_atoms.py records the atom operators); "
            f"its figures: ptogym/ops/{op}/README.md"]))
    if not card.used_by:
        print("  no ptogym operator uses this pattern yet")
    return 0


def _graph(cards, plot_path: str | None) -> int:
    for source, target, kind in edges(cards):
        print(f"{source} -> {target}  ({kind})")
    if plot_path:
        try:
            draw(cards, plot_path)
        except ImportError as error:
            print(f"--plot needs matplotlib ({error}); pip install 'ptogym[bench]'")
            return 2
        except OSError as error:
            print(f"error: --plot: {write_failure(plot_path, error)}")
            return 2
        print(f"wrote {plot_path}")
    return 0


def draw(cards, path: str) -> None:
    """Three columns - atoms, skeletons, operators - with an arrow per edge."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    atoms = [c for c in cards if c.startswith("AT")]
    skeletons = [c for c in cards if c.startswith("SK")]
    operators = sorted({op for c in cards.values() for op in c.used_by})
    columns = [atoms, skeletons, operators]
    place = {name: (x, -y) for x, column in enumerate(columns) for y, name in enumerate(column)}
    fig, ax = plt.subplots(figsize=(11, 0.55 * max(map(len, columns)) + 1.5))
    for source, target, kind in edges(cards):
        (x0, y0), (x1, y1) = place[source], place[target]
        ax.annotate("", (x1, y1), (x0, y0), arrowprops={"arrowstyle": "->", "alpha": 0.5,
                                                          "color": "tab:blue" if kind == "depends_on" else "tab:green",
                                                          "connectionstyle": "arc3,rad=0.15"})
    for name, (x, y) in place.items():
        label = f"{name} {cards[name].title}" if name in cards else name
        ax.text(x, y, label, ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round", "fc": "white", "ec": "gray"})
    ax.set_xlim(-0.6, 2.6)
    ax.set_ylim(-max(map(len, columns)), 1)
    ax.set_xticks([0, 1, 2], ["atoms", "skeletons", "operators"])
    ax.set_yticks([])
    ax.set_title("pattern library: depends_on (blue) and used_by (green)")
    fig.tight_layout()
    save_figure(fig, path)


def _cli(args) -> int:
    try:
        cards = load_cards()
        problems = check_library(cards, operator_claims())
    except CardError as error:
        cards, problems = None, [str(error)]
    if problems:
        print("\n".join(["pattern library is inconsistent:", *problems]))
        code = 2
    elif args.action == "show":
        code = _show(cards, args.target) if args.target else _usage("patterns show needs a pattern id")
    elif args.action == "graph":
        code = _graph(cards, args.plot)
    else:
        code = _list(cards, args)
    print(OK if code == 0 else ERROR, file=sys.stderr if args.json else sys.stdout)
    return code


def _usage(message: str) -> int:
    print(message)
    return 2


def add_cli(subparsers) -> None:
    parser = subparsers.add_parser("patterns", help="the pattern cards: list, show ID, graph",
                                   description=__doc__.split("\n\n")[1])
    parser.add_argument("action", nargs="?", choices=("show", "graph"), help="show one card, or the graph")
    parser.add_argument("target", nargs="?", help="the pattern id for show (e.g. AT-10)")
    parser.add_argument("--tag", help="only cards with this tag")
    parser.add_argument("--flow", help="only cards whose V/C flow contains these steps, e.g. V,C")
    parser.add_argument("--json", action="store_true", help="the list as JSON")
    parser.add_argument("--plot", help="graph: also draw it to this PNG")
    parser.set_defaults(func=_cli)
