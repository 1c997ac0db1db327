"""The iptables chains a real node leaves on this machine, removed when it is restored.

kube-proxy writes its Service rules (``KUBE-SERVICES`` ... in the nat and filter
tables) and removes them with ``kube-proxy --cleanup``; kubelet, once ``iptables`` is
installed, writes chains of its own that nothing removes (``KUBE-FIREWALL`` with
rules jumping to it from INPUT and OUTPUT, ``KUBE-KUBELET-CANARY``,
``KUBE-IPTABLES-HINT``), for IPv4 and IPv6. :func:`remove_kube_chains` runs the
former and then deletes every rule that jumps to a ``KUBE-`` chain and every such
chain, in each table of both families; rules of other owners stay.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

FAMILIES = ("iptables", "ip6tables")
PREFIX = "KUBE-"
TIMEOUT_S = 120.0


class IptablesError(RuntimeError):
    """``KUBE-`` chains or rules are left after the cleanup."""


def _save(family: str) -> str:
    if shutil.which(f"{family}-save") is None:
        return ""
    done = subprocess.run([f"{family}-save"], capture_output=True, text=True, check=True)
    return done.stdout


def kube_lines(family: str = "iptables") -> list[str]:
    """The ``KUBE-`` chains and the rules naming them, as ``<family>-save`` prints them."""
    return [line for line in _save(family).splitlines() if PREFIX in line]


def _plan(save: str) -> tuple[list[tuple[str, list[str]]], list[tuple[str, str]]]:
    """The rules to delete (table, ``-D`` arguments) and the chains to remove (table, name)."""
    table, rules, chains = "", [], []
    for line in save.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(f":{PREFIX}"):
            chains.append((table, line[1:].split()[0]))
        elif line.startswith("-A ") and PREFIX in line and not line.split()[1].startswith(PREFIX):
            rules.append((table, ["-D", *shlex.split(line)[1:]]))
    return rules, chains


def _run(argv: list[str]) -> None:
    subprocess.run(argv, capture_output=True, check=False, timeout=TIMEOUT_S)


def remove_kube_chains(kube_proxy: Path | None) -> None:
    """``kube-proxy --cleanup`` (when its binary is given and exists), then every remaining
    ``KUBE-`` rule and chain; raises :class:`IptablesError` naming what is left."""
    if kube_proxy is not None and kube_proxy.exists():
        _run([str(kube_proxy), "--cleanup"])
    for family in FAMILIES:
        rules, chains = _plan(_save(family))
        for table, args in rules:
            _run([family, "-w", "-t", table, *args])
        for flag in ("-F", "-X"):  # empty every chain first: they may jump to each other
            for table, chain in chains:
                _run([family, "-w", "-t", table, flag, chain])
    left = [f"{family}: {line}" for family in FAMILIES for line in kube_lines(family)]
    if left:
        raise IptablesError(f"iptables chains left after the cleanup: {left[:5]}")
