"""``arkgpu placement bound|defrag|replay|study``: limits, re-packing and replay of placement."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from arkgpu.bench.placement import parse_seeds
from arkgpu.bench.placement_cost import RelearnMode, decision_costs
from arkgpu.bench.placement_study import (
    OPENB_TRACES,
    StudySpec,
    bound_inputs,
    plot_replay,
    plot_study,
    run_study,
)
from arkgpu.placement import POLICIES
from arkgpu.placement.bounds import lp_bound
from arkgpu.placement.bounds_offline import clairvoyant
from arkgpu.placement.defrag import greedy_plan, plan_summary, validate, waiting_demand
from arkgpu.placement.defrag_ga import ga_plan
from arkgpu.sim.placing import ExperimentConfig
from arkgpu.sim.replay import ReplayConfig, place_until, replay
from arkgpu.traces.catalog import TraceRef, default_node_list, resolve_pod_trace
from arkgpu.traces.openb import load_nodes, load_pods


def trace_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", default="default", help="pod CSV, 'default', or an openb name")
    parser.add_argument("--nodes", type=Path, default=None, help="node CSV (default: openb GPUs)")
    parser.add_argument("--inflate", type=float, default=1.3, help="arrivals as x capacity")


def _resolve(spec: str, nodes: Path | None) -> tuple[TraceRef, Path]:
    from arkgpu.cli.placement import trace_dirs  # noqa: PLC0415 (the module imports this one)

    return resolve_pod_trace(spec, trace_dirs()), nodes or default_node_list()


def register_tools(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bound``, ``defrag``, ``replay`` and ``study`` to the ``placement`` group."""
    bound = sub.add_parser("bound", help="LP lower bound and clairvoyant packing at 100%% arrived")
    trace_args(bound)
    bound.add_argument("--seed", type=int, default=42)
    bound.add_argument("--json", action="store_true", help="print the result as JSON")
    bound.set_defaults(handler=cmd_bound)
    defrag = sub.add_parser("defrag", help="re-pack at 100%% arrived moving at most K pods")
    trace_args(defrag)
    defrag.add_argument("--policy", required=True, choices=POLICIES.names())
    defrag.add_argument("--seed", type=int, default=42)
    defrag.add_argument(
        "--max-moves", default="50", help="K: running pods moved at most (or a list: 10,50,200)"
    )
    defrag.add_argument("--planner", default="ga", help="ga, greedy, or both: ga,greedy")
    defrag.add_argument("--json", action="store_true", help="print the result as JSON")
    defrag.set_defaults(handler=cmd_defrag)
    replay = sub.add_parser("replay", help="time-ordered replay with departures and a queue")
    trace_args(replay)
    replay.add_argument("--policy", required=True, help="a policy, or a list: arkgpu,fgd")
    replay.add_argument("--seed", type=int, default=42)
    replay.add_argument("--load", type=float, default=1.2, help="peak load if none waited")
    replay.add_argument("--node-fraction", type=float, default=0.5)
    replay.add_argument(
        "--refused-retry-s",
        type=int,
        default=300,
        help="offer a pod the policy refused though it fit again after this many s",
    )
    replay.add_argument("--json", action="store_true", help="print the result as JSON")
    replay.add_argument("--plot", type=Path, default=None, help="write allocation/queue PNG here")
    replay.set_defaults(handler=cmd_replay)
    cost = sub.add_parser("cost", help="decision cost per pod: wall clock and CPU time")
    trace_args(cost)
    cost.add_argument("--policies", default="arkgpu,fgd")
    cost.add_argument("--seed", type=int, default=42)
    relearn = cost.add_mutually_exclusive_group()
    relearn.add_argument(
        "--relearn-lag", type=int, default=0, help="arkgpu: use what it re-learns N GPU pods later"
    )
    relearn.add_argument(
        "--background-relearn", action="store_true", help="arkgpu: re-learn on a worker thread"
    )
    cost.set_defaults(handler=cmd_cost)
    study = sub.add_parser("study", help="every openb trace: policies, LP bound, clairvoyant")
    study.add_argument("--traces", default=",".join(OPENB_TRACES))
    study.add_argument("--nodes", type=Path, default=None)
    study.add_argument("--policies", default="arkgpu,fgd")
    study.add_argument("--seeds", default="42-51")
    study.add_argument("--baselines", default="bestfit,packing,clustering,dotprod,random")
    study.add_argument("--baseline-seeds", default="42-43")
    study.add_argument("--clairvoyant-seeds", default="42")
    study.add_argument("--jobs", type=int, default=1)
    study.add_argument("--json", type=Path, required=True, dest="json_out")
    study.add_argument("--plot", type=Path, default=None)
    study.set_defaults(handler=cmd_study)


def bound_document(trace: TraceRef, nodes_path: Path, seed: int, inflate: float) -> dict[str, Any]:
    """The ``bound`` command's result."""
    nodes, pods = load_nodes(nodes_path), load_pods(trace.path)
    ordered, arrived = bound_inputs(nodes, pods, ExperimentConfig(inflate=inflate, seed=seed))
    bound = lp_bound(ordered, arrived)
    packed = clairvoyant(ordered, arrived, bound)
    return {
        "trace": trace.label,
        "seed": seed,
        "pods_arrived_at_100": len(arrived),
        "lp_bound_unallocated_pct": bound.unallocated_pct,
        "lp_rounds": bound.rounds,
        "lp_patterns": bound.patterns,
        "lp_unhostable_pods": bound.unhostable,
        "clairvoyant_unallocated_pct": packed.unallocated_pct,
        "clairvoyant_method": packed.method,
        "clairvoyant_by_method": packed.by_method,
    }


def cmd_bound(args: argparse.Namespace) -> int:
    """Print the LP bound and the clairvoyant figure for one seed."""
    trace, nodes_path = _resolve(args.trace, args.nodes)
    doc = bound_document(trace, nodes_path, args.seed, args.inflate)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(
        f"{doc['trace']} seed {args.seed}: LP bound {doc['lp_bound_unallocated_pct']:.2f}% "
        "unallocated at 100% arrived; clairvoyant packing "
        f"{doc['clairvoyant_unallocated_pct']:.2f}% "
        f"({doc['clairvoyant_method']})"
    )
    return 0


def _defrag_args(args: argparse.Namespace) -> tuple[list[int], list[str]]:
    try:
        ks = [int(k) for k in str(args.max_moves).split(",")]
    except ValueError:
        raise ValueError(f"--max-moves must be integers, got {args.max_moves!r}") from None
    if any(k < 0 for k in ks):
        raise ValueError(f"--max-moves must be >= 0, got {args.max_moves}")
    planners = [p.strip() for p in args.planner.split(",")]
    if not set(planners) <= {"ga", "greedy"}:
        raise ValueError(f"--planner must be ga, greedy or both, got {args.planner!r}")
    return ks, planners


def cmd_defrag(args: argparse.Namespace) -> int:
    """Run the policy to 100% arrived, then plan re-packings of at most K moves."""
    ks, planners = _defrag_args(args)
    trace, nodes_path = _resolve(args.trace, args.nodes)
    nodes, pods = load_nodes(nodes_path), load_pods(trace.path)
    problem = place_until(nodes, pods, args.policy, args.seed, args.inflate)
    docs = []
    for k in ks:
        for planner in planners:
            started = time.perf_counter()
            if planner == "ga":
                plan = ga_plan(problem, k, np.random.default_rng(args.seed))
            else:
                plan = greedy_plan(problem, k)
            seconds = time.perf_counter() - started
            validate(problem, plan)
            docs.append(
                {
                    "trace": trace.label,
                    "policy": args.policy,
                    "seed": args.seed,
                    "planner": planner,
                    "max_moves": k,
                    "pods_waiting": len(problem.waiting),
                    "waiting_gpus": waiting_demand(problem.waiting) / 1000,
                    **plan_summary(problem, plan, seconds),
                }
            )
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
        return 0
    for d in docs:
        print(
            f"{trace.label} {args.policy} seed {args.seed}, {d['planner']} K={d['max_moves']}: "
            f"{d['gpus_gained']:.2f} GPUs gained by moving {d['pods_moved']} pods "
            f"({d['pods_admitted']} of {d['pods_waiting']} waiting pods admitted), "
            f"{d['wall_s']:.1f} s"
        )
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay the trace in time order with departures, per policy; print the queue figures."""
    trace, nodes_path = _resolve(args.trace, args.nodes)
    config = ReplayConfig(
        seed=args.seed,
        load=args.load,
        node_fraction=args.node_fraction,
        refused_retry_s=args.refused_retry_s,
    )
    nodes, pods = load_nodes(nodes_path), load_pods(trace.path)
    docs: list[dict[str, Any]] = []
    for name in policy_names(args.policy):
        result = replay(nodes, pods, name, config)
        doc: dict[str, Any] = {"trace": trace.label, "simulated": True, **result.summary()}
        doc["times_s"] = result.times_s.tolist()
        doc["allocation_pct"] = result.allocation_pct.tolist()
        doc["waiting"] = result.waiting.tolist()
        docs.append(doc)
        if not args.json:
            print(
                f"{trace.label} {name} (simulated replay): mean GPU allocation "
                f"{doc['mean_allocation_pct']:.1f}%, mean waiting {doc['mean_waiting']:.1f} pods, "
                f"wait mean {doc['wait_s_mean']:.0f} s p99 {doc['wait_s_p99']:.0f} s, "
                f"{doc['never_placed']} never placed"
            )
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
    if args.plot is not None:
        plot_replay(args.plot, f"{trace.label} replay (simulated)", docs)
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    """Print the decision cost of each policy as JSON lines."""
    if args.relearn_lag < 0:
        raise ValueError(f"--relearn-lag must be >= 0 GPU pods, got {args.relearn_lag}")
    trace, nodes_path = _resolve(args.trace, args.nodes)
    relearn = RelearnMode(lag=args.relearn_lag, background=args.background_relearn)
    for name in policy_names(args.policies):
        doc = decision_costs(nodes_path, trace.path, name, args.seed, args.inflate, relearn)
        print(json.dumps({"trace": trace.label, "seed": args.seed, **doc}))
    return 0


def policy_names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for name in names:
        if name not in POLICIES.names():
            raise ValueError(f"unknown policy {name!r} (known: {', '.join(POLICIES.names())})")
    return names


def cmd_study(args: argparse.Namespace) -> int:
    """Run the per-trace study, rewriting the JSON after every task."""
    traces = tuple(_resolve(t.strip(), None)[0] for t in args.traces.split(",") if t.strip())
    spec = StudySpec(
        nodes_path=args.nodes or default_node_list(),
        traces=traces,
        policies=policy_names(args.policies),
        seeds=parse_seeds(args.seeds),
        baselines=policy_names(args.baselines),
        baseline_seeds=parse_seeds(args.baseline_seeds) if args.baselines else (),
        clairvoyant_seeds=parse_seeds(args.clairvoyant_seeds) if args.clairvoyant_seeds else (),
        jobs=args.jobs,
    )
    console = Console(width=120)

    def update(report: dict[str, Any]) -> None:
        args.json_out.write_text(json.dumps(report, indent=2))
        console.print(f"{report['tasks_done']}/{report['tasks_total']} tasks done")

    report = run_study(spec, update)
    if args.plot is not None:
        plot_study(args.plot, report)
    for t in report["traces"]:
        ours = t["policies"].get("arkgpu", {}).get("mean_at_100")
        console.print(
            f"{t['trace']}: arkgpu {ours}, fgd {t['policies'].get('fgd', {}).get('mean_at_100')}, "
            f"LP {t.get('lp_bound_unallocated_pct')}, target {t.get('target_at_100')}"
        )
    return 0
