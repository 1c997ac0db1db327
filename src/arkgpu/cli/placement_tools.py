"""``arkgpu placement bound|defrag|replay|study``: limits, re-packing and replay of placement."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from arkgpu.bench.placement_cost import RelearnMode, decision_costs
from arkgpu.bench.placement_study import (
    bound_inputs,
    plot_replay,
)
from arkgpu.cli import figures
from arkgpu.cli.options import (
    ArgType,
    integer,
    json_option,
    name_list,
    number,
    plot_option,
    seed_option,
)
from arkgpu.cli.placement_inputs import (
    check_inputs,
    policy_arg,
    policy_names,
    trace_args,
)
from arkgpu.cli.placement_study import register_study
from arkgpu.placement.bounds import lp_bound
from arkgpu.placement.bounds_offline import clairvoyant
from arkgpu.placement.defrag import greedy_plan, plan_summary, validate, waiting_demand
from arkgpu.placement.defrag_ga import ga_plan
from arkgpu.sim.placing import ExperimentConfig
from arkgpu.sim.replay import ReplayConfig, place_until, replay
from arkgpu.traces.catalog import TraceRef
from arkgpu.traces.openb import load_nodes, load_pods

planner_list = name_list(lambda: ("ga", "greedy"))
"""An argparse type: ``ga``, ``greedy`` or both."""


def _parse_move_counts(text: str) -> tuple[int, ...]:
    parse = integer(0)
    try:
        return tuple(parse(k) for k in text.split(","))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected integers >= 0 (K or K,K,...), got {text!r}"
        ) from None


move_counts = ArgType(_parse_move_counts, ("-1", "abc", "10,,50", ""), "K")
"""An argparse type: K or a comma list of K, each an integer >= 0."""


def register_tools(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bound``, ``defrag``, ``replay``, ``cost`` and ``study`` to ``placement``."""
    _register_bound(sub)
    _register_defrag(sub)
    _register_replay(sub)
    _register_cost(sub)
    register_study(sub)


def _register_bound(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bound = sub.add_parser("bound", help="LP lower bound and clairvoyant packing at 100%% arrived")
    trace_args(bound)
    seed_option(bound, 42, "seed of the arrival order")
    json_option(bound, "the result")
    bound.set_defaults(handler=cmd_bound)


def _register_defrag(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    defrag = sub.add_parser("defrag", help="re-pack at 100%% arrived moving at most K pods")
    trace_args(defrag)
    defrag.add_argument(
        "--policy",
        required=True,
        metavar="NAME",
        choices=policy_names(),
        help=f"policy that placed the pods: one of {', '.join(policy_names())} (required)",
    )
    seed_option(defrag, 42)
    defrag.add_argument(
        "--max-moves",
        metavar="K",
        type=move_counts,
        default=(50,),
        help="running pods moved at most, an integer >= 0, or a list: 10,50,200 (default: 50)",
    )
    defrag.add_argument(
        "--planner",
        metavar="NAMES",
        type=planner_list,
        default=("ga",),
        help="ga, greedy, or both: ga,greedy (default: ga)",
    )
    json_option(defrag, "the plans")
    defrag.set_defaults(handler=cmd_defrag)


def _register_replay(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rep = sub.add_parser("replay", help="time-ordered replay with departures and a queue")
    trace_args(rep, inflate=False)
    policy_arg(rep, "--policy", None, "policy, or a list: arkgpu,fgd")
    seed_option(rep, 42, "seed of the policy's tie-breaks and the node sample")
    rep.add_argument(
        "--load",
        metavar="X",
        type=number(0.0, 100.0, low_open=True),
        default=1.2,
        help="peak share of GPU capacity held if no pod waited, 0 < X <= 100 (default: 1.2)",
    )
    rep.add_argument(
        "--node-fraction",
        metavar="F",
        type=number(0.0, 1.0, low_open=True),
        default=0.5,
        help="share of the node list kept, 0 < F <= 1 (default: 0.5)",
    )
    rep.add_argument(
        "--refused-retry-s",
        metavar="S",
        type=integer(1),
        default=300,
        help="offer a pod the policy refused though it fit again after S seconds, an "
        "integer >= 1 (default: 300)",
    )
    json_option(rep, "the summary and curves")
    plot_option(rep, "allocation and queue against time")
    rep.set_defaults(handler=cmd_replay)


def _register_cost(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cost = sub.add_parser("cost", help="decision cost per pod: wall clock and CPU time")
    trace_args(cost)
    policy_arg(cost, "--policies", "arkgpu,fgd", "policies")
    seed_option(cost, 42)
    relearn = cost.add_mutually_exclusive_group()
    relearn.add_argument(
        "--relearn-lag",
        metavar="N",
        type=integer(0),
        default=0,
        help="arkgpu: use what it re-learns N GPU pods later, an integer >= 0 (default: 0)",
    )
    relearn.add_argument(
        "--background-relearn",
        action="store_true",
        help="arkgpu: re-learn on a worker thread (default: inline)",
    )
    cost.set_defaults(handler=cmd_cost)


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
    inputs = check_inputs(args)
    doc = bound_document(inputs.trace, inputs.nodes_path, args.seed, args.inflate)
    if args.json_out is not None:
        args.json_out.write_json(doc)
        if args.json_out.to_stdout:
            return 0
    print(
        f"{doc['trace']} seed {args.seed} (simulated): no placement can leave less than "
        f"{doc['lp_bound_unallocated_pct']:.2f}% of GPU capacity unallocated at 100% arrived "
        f"(LP bound); clairvoyant packing {doc['clairvoyant_unallocated_pct']:.2f}% "
        f"({doc['clairvoyant_method']}); lower is better"
    )
    return 0


def cmd_defrag(args: argparse.Namespace) -> int:
    """Run the policy to 100% arrived, then plan re-packings of at most K moves."""
    inputs = check_inputs(args)
    nodes, pods = load_nodes(inputs.nodes_path), load_pods(inputs.trace.path)
    problem = place_until(nodes, pods, args.policy, args.seed, args.inflate)
    docs = []
    for k in args.max_moves:
        for planner in args.planner:
            started = time.perf_counter()
            if planner == "ga":
                plan = ga_plan(problem, k, np.random.default_rng(args.seed))
            else:
                plan = greedy_plan(problem, k)
            seconds = time.perf_counter() - started
            validate(problem, plan)
            docs.append(
                {
                    "trace": inputs.trace.label,
                    "policy": args.policy,
                    "seed": args.seed,
                    "planner": planner,
                    "max_moves": k,
                    "pods_waiting": len(problem.waiting),
                    "waiting_gpus": waiting_demand(problem.waiting) / 1000,
                    **plan_summary(problem, plan, seconds),
                }
            )
    if args.json_out is not None:
        args.json_out.write_json(docs[0] if len(docs) == 1 else docs)
        if args.json_out.to_stdout:
            return 0
    for d in docs:
        print(
            f"{inputs.trace.label} {args.policy} seed {args.seed}, {d['planner']} "
            f"K={d['max_moves']} (simulated): {d['gpus_gained']:.2f} GPUs gained (higher is "
            f"better) by moving {d['pods_moved']} pods; {d['pods_admitted']} of "
            f"{d['pods_waiting']} waiting pods admitted; planned in {figures.duration(d['wall_s'])}"
        )
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay the trace in time order with departures, per policy; print the queue figures."""
    inputs = check_inputs(args)
    config = ReplayConfig(
        seed=args.seed,
        load=args.load,
        node_fraction=args.node_fraction,
        refused_retry_s=args.refused_retry_s,
    )
    nodes, pods = load_nodes(inputs.nodes_path), load_pods(inputs.trace.path)
    to_stdout = args.json_out is not None and args.json_out.to_stdout
    docs: list[dict[str, Any]] = []
    for name in args.policy:
        result = replay(nodes, pods, name, config)
        doc: dict[str, Any] = {"trace": inputs.trace.label, "simulated": True, **result.summary()}
        doc["times_s"] = result.times_s.tolist()
        doc["allocation_pct"] = result.allocation_pct.tolist()
        doc["waiting"] = result.waiting.tolist()
        docs.append(doc)
        if not to_stdout:
            _print_replay(inputs.trace.label, name, doc)
    if args.json_out is not None:
        args.json_out.write_json(docs[0] if len(docs) == 1 else docs)
    if args.plot is not None:
        plot_replay(args.plot.path, f"{inputs.trace.label} replay (simulated)", docs)
    return 0


def _print_replay(label: str, name: str, doc: dict[str, Any]) -> None:
    print(
        f"{label} {name} (simulated replay): mean GPU allocation "
        f"{doc['mean_allocation_pct']:.1f}% (higher is better); mean queue "
        f"{doc['mean_waiting']:.1f} pods; wait mean {figures.duration(doc['wait_s_mean'])}, "
        f"p99 {figures.duration(doc['wait_s_p99'])} (lower is better; 0 s: no pod waited); "
        f"{figures.count(doc['never_placed'])} never placed"
    )


def cmd_cost(args: argparse.Namespace) -> int:
    """Print the decision cost of each policy as JSON lines."""
    inputs = check_inputs(args)
    relearn = RelearnMode(lag=args.relearn_lag, background=args.background_relearn)
    for name in args.policies:
        doc = decision_costs(
            inputs.nodes_path, inputs.trace.path, name, args.seed, args.inflate, relearn
        )
        print(json.dumps({"trace": inputs.trace.label, "seed": args.seed, **doc}))
    return 0
