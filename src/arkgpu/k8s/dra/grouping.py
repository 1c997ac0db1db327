"""What one container of a claim gets: the claim's shares grouped by main request. Pure.

The kubelet gives a container the CDI devices of the results of the request its
``resources.claims[].request`` names, or of every result of the claim when it names
none. A container's environment (``CUDA_VISIBLE_DEVICES``, ``ARKGPU_REGION_DIR``) and
its region mount are single values, so the devices a container gets must come from
one CDI device carrying them: Prepare makes one **group** per main request of the
claim (a ``firstAvailable`` result ``gpu/large`` belongs to ``gpu``), with one region
for all of its GPUs, and every result of the group names the group's CDI device.
Results of one request ask for the same capacity, so a group's caps are uniform; two
shares of one GPU in a group (``count: 2`` may take one device twice) are one GPU to
the container, with the sum of their memory and cores.

A container that would get two groups (two ArkGPU claims, or a claim with two requests
used whole) would get two clashing environments and region mounts: :func:`clash`
finds it, and Prepare fails with that line (the kubelet shows it in the pod's events).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arkgpu.k8s.dra.claims import ClaimError, Share, base_request
from arkgpu.k8s.gpus import MIB
from arkgpu.limiter.layout import MAX_DEVICES
from arkgpu.limiter.region import Limits


@dataclass(frozen=True)
class Group:
    """The shares of one main request of a claim: what one container can be given."""

    request: str
    """The main request (a DNS label: a valid folder and CDI name part)."""
    shares: tuple[Share, ...]
    """Its results, in the allocation's order."""

    @property
    def gpus(self) -> tuple[int, ...]:
        """The GPU indices, each once, in the allocation's order (CUDA's device order)."""
        return tuple(dict.fromkeys(s.gpu_index for s in self.shares))

    def memory_mib(self, gpu: int) -> int:
        """Memory cap on GPU ``gpu``: the sum of the group's shares of it, MiB."""
        return sum(s.memory_mib for s in self.shares if s.gpu_index == gpu)

    def cores(self, gpu: int) -> int:
        """Compute share of GPU ``gpu``: the sum of the group's shares of it, percent."""
        return min(100, sum(s.cores for s in self.shares if s.gpu_index == gpu))

    def limits(self) -> Limits:
        """The region's limits: a memory cap per GPU (CUDA ordinal order) and one share,
        the smallest of the GPUs' (the region format paces every GPU at one share; a group's
        GPUs have equal shares unless a GPU was taken twice)."""
        caps = tuple(self.memory_mib(g) * MIB for g in self.gpus)
        return Limits(caps, share_bp=min(self.cores(g) for g in self.gpus) * 100)


def groups(shares: list[Share], where: str) -> list[Group]:
    """The shares by main request, in the order requests first appear (ClaimError naming
    a group of more GPUs than a region holds)."""
    by_request: dict[str, list[Share]] = {}
    for share in shares:
        by_request.setdefault(share.base_request, []).append(share)
    found = [Group(request, tuple(members)) for request, members in by_request.items()]
    for group in found:
        if len(group.gpus) > MAX_DEVICES:
            raise ClaimError(
                f"{where}: request {group.request} has {len(group.gpus)} GPUs; "
                f"a container's region holds at most {MAX_DEVICES}"
            )
    return found


RequestsOf = Callable[[str], list[str]]
"""A claim's name (in the pod's namespace) -> the main requests of this driver's results
in it (empty: not this driver's, not allocated, or not found)."""


def claim_names(pod: dict[str, Any]) -> dict[str, str]:
    """The pod's claim entries by name -> the ResourceClaim's name (a template's claim is
    named in ``status.resourceClaimStatuses``; an entry whose claim is not made yet is left
    out)."""
    made = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    names = {}
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        claim = entry.get("resourceClaimName") or made.get(entry.get("name"))
        if claim:
            names[str(entry["name"])] = str(claim)
    return names


def container_groups(
    container: dict[str, Any], names: dict[str, str], requests_of: RequestsOf
) -> list[str]:
    """The groups (``<claim>/<request>``) of this driver a container would be given."""
    found: dict[str, None] = {}
    for use in (container.get("resources") or {}).get("claims") or []:
        claim = names.get(str(use.get("name")))
        if claim is None:
            continue
        ours = requests_of(claim)
        asked = use.get("request")
        wanted = [base_request(str(asked))] if asked else ours
        found.update((f"{claim}/{r}", None) for r in wanted if r in ours)
    return list(found)


def clash(pod: dict[str, Any], requests_of: RequestsOf, driver: str) -> str | None:
    """One line naming the first container of ``pod`` that would get devices of two groups
    (their environments and region mounts would clash), or None."""
    names = claim_names(pod)
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        got = container_groups(container, names, requests_of)
        if len(got) > 1:
            return (
                f"pod {meta.get('namespace')}/{meta.get('name')} container "
                f"{container.get('name')} would get the {driver} devices of {len(got)} requests "
                f"({', '.join(got)}); a container may use one: ask for count: N in one request "
                "of one claim, or name one request per container in resources.claims"
            )
    return None
