"""A pod counted in the extender's scheduler state, and how sure the extender is of it.

A bind marks its new placement :attr:`Placed.writing` while it writes the
assignment annotation and the Binding; a write cut off with no known outcome
leaves it unconfirmed or pinned to its node until a list, an event or another
bind settles it (:class:`arkgpu.k8s.extender.state.ClusterView`).
"""

from __future__ import annotations

from dataclasses import dataclass

from arkgpu.k8s.contract import PodAssignment


@dataclass
class Placed:
    """A pod counted in the scheduler's state."""

    assignment: PodAssignment
    """Where (node and GPUs, as the annotation says or will say)."""
    writing: bool = False
    """A bind is writing this placement to the API server (events leave it alone)."""
    confirmed: bool = True
    """The annotation is known to be on the pod; False after a write whose outcome is
    unknown (the connection was cut): the next list or event about the pod settles it."""
    pinned: bool = False
    """A write of a bind to this node has no known outcome (a cut-off Binding may still
    land): the pod stays on this node until it is seen bound or a bind here succeeds."""

    @property
    def stays(self) -> bool:
        """The pod may go to this placement's node only."""
        return self.pinned or not self.confirmed
