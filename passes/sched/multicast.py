"""sched-multicast: one DDR read for the tiles that load the same bytes.

A layer split over tiles by output channels loads the same input window on every tile that
computes those rows; one split by rows or columns loads the same weights on every tile. All
tiles share one DDR port, so at 8 tiles these copies are most of the bytes the port moves
above the compulsory ones. This pass turns each group of such loads, one per tile, into one
`sched.multicast_dma` (a `dma` with `dst_tiles`, docs/isa.md): one load of the group stays and
writes every member's buffer, the others go, and the tasks that waited for a removed load wait
for the kept one. The kept load is the group's last one in program order that still comes
before any member's buffer is read: the tiles that load earlier get their buffer later, and
the ones that load later get it no earlier than needed, so the OCM each tile holds grows
least.

A group forms only when the merge cannot change what is read or what fits:
- each member buffer is an OCM `sched.alloc` written by nothing but its loads (DMAs from DDR),
  and all members' loads are the same (source bytes, offsets, strides, box), in one order;
- nothing between a member's load and the kept one writes the DDR buffers they read, so each
  member gets the bytes it got before;
- every token a removed load waited for exists where the kept load is, and nothing before it
  waits for a removed load;
- the members' buffers now live from the kept load on, at one offset on every tile
  (`allocate.first_fit_offsets`); the groups of a layer whose buffers then do not fit are
  given up.

It runs after `sched-pipeline` (which places the loads) and before `sched-allocate` (which
co-allocates each group); `sched-insert-sync` then makes the kept load wait for the earlier
readers of the bytes it overwrites on every tile it writes.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from mrvl.dialects import sched
from mrvl.passes.common import MrvlModulePass
from mrvl.passes.sched.allocate import overflowing_layers
from mrvl.passes.sched.liveness import live_ranges, root, written


def _is_load(op: Operation, buffer: sched.AllocOp) -> bool:
    return (
        isinstance(op, sched.DmaOp)
        and op.dest.owner is buffer
        and sched.buffer_type(op.source).space.data == "ddr"
    )


def _load_key(op: sched.DmaOp) -> tuple:
    """What a load reads and where it writes in its buffer: equal keys, equal bytes (the
    properties compare by value)."""
    props = op.properties
    return (
        id(root(op.source)),
        op.source.type,
        *(props.get(name) for name in ("src_offsets", "src_strides", "dst_offsets")),
        *(props.get(name) for name in ("dst_strides", "box")),
    )


def _first_read(member: "_Member", position: dict[int, int]) -> int:
    """The first position where anything but its loads uses the member's buffer."""
    loads = {id(load) for load in member.loads}
    first = len(position)
    pending = [member.alloc.buffer]
    while pending:
        for use in pending.pop().uses:
            user = use.operation
            if isinstance(user, sched.ViewOp):
                pending.append(user.buffer)
            elif id(user) not in loads:
                first = min(first, position[id(user)])
    return first


@dataclass
class _Member:
    alloc: sched.AllocOp
    loads: list[sched.DmaOp]

    @property
    def tile(self) -> int:
        return self.alloc.tile.value.data


@dataclass
class _Group:
    members: list[_Member]
    """The kept member first (its loads stay and write every member's buffer), then the
    others."""

    @property
    def kept(self) -> _Member:
        return self.members[0]


@dataclass(frozen=True)
class MulticastPass(MrvlModulePass):
    name = "sched-multicast"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        program = sched.program_of(op)
        if program.tiles == 1:
            return
        ops = list(program.ops)
        position = {id(o): i for i, o in enumerate(ops)}
        groups = self.groups(ops, position)
        target = program.target
        while groups:
            order = self.reordered(ops, groups)
            buffers = [(g.kept.alloc, *(m.alloc for m in g.members[1:])) for g in groups]
            failing = overflowing_layers(live_ranges(order), target, buffers)
            if not failing:
                self.rewrite(program, ops, order, groups)
                return
            # give up the groups of the layers whose buffers did not fit, and try again
            kept = [g for g in groups if not any(m.alloc.location in failing for m in g.members)]
            groups = kept if len(kept) < len(groups) else []

    # ----------------------------------------------------------------- finding the groups

    @staticmethod
    def groups(ops: list[Operation], position: dict[int, int]) -> list[_Group]:
        writers: dict[int, list[Operation]] = {}  # id(OCM alloc) -> the tasks writing it
        ddr_writes: dict[int, list[int]] = {}  # id(DDR buffer) -> positions of its writers
        for i, o in enumerate(ops):
            if not isinstance(o, sched.TaskBase):
                continue
            for value in written(o):
                buffer = root(value)
                if sched.buffer_type(value).space.data == "ocm":
                    writers.setdefault(id(buffer), []).append(o)
                else:
                    ddr_writes.setdefault(id(buffer), []).append(i)
        by_key: dict[tuple, list[_Member]] = {}
        for o in ops:
            if not isinstance(o, sched.AllocOp) or o.tile is None:
                continue
            loads = writers.get(id(o), [])
            if not loads or not all(_is_load(w, o) for w in loads):
                continue
            key = (o.buffer.type, *(_load_key(w) for w in loads))
            by_key.setdefault(key, []).append(_Member(o, loads))

        def ready(member: _Member, kept: _Member) -> bool:
            """Whether `member`'s loads can each be done where `kept`'s are (the module)."""
            for load, instead in zip(member.loads, kept.loads):
                start, at = position[id(load)], position[id(instead)]
                writes = ddr_writes.get(id(root(load.source)), ())
                if bisect_right(writes, start) != bisect_right(writes, at):
                    return False
                if any(position.get(id(d.owner), -1) >= at for d in load.deps):
                    return False
                if any(position[id(use.operation)] <= at for use in load.token.uses):
                    return False
            return True

        groups: list[_Group] = []
        for members in by_key.values():
            if len(members) < 2:
                continue
            members.sort(key=lambda m: position[id(m.loads[0])])
            runs: list[list[_Member]] = [[]]
            for m in members:  # runs of loads in program order, one per tile
                if m.tile in {r.tile for r in runs[-1]}:
                    runs.append([])
                runs[-1].append(m)
            for run in runs:
                if len(run) < 2:
                    continue
                # the kept load: the last one that still comes before every member is read,
                # so that the tiles' buffers live no earlier than needed
                limit = min(_first_read(m, position) for m in run)
                early = [m for m in run if position[id(m.loads[-1])] < limit]
                if not early:
                    continue
                kept = early[-1]
                others = [m for m in run if m is not kept and ready(m, kept)]
                if others:
                    groups.append(_Group([kept, *others]))
        return groups

    # ----------------------------------------------------------------- the new order

    @staticmethod
    def reordered(ops: list[Operation], groups: list[_Group]) -> list[Operation]:
        """`ops` with each group's other buffers defined before its kept load, and the other
        loads gone."""
        before: dict[int, list[Operation]] = {}  # id(kept first load) -> allocs to put before
        gone: set[int] = set()
        for g in groups:
            first = g.kept.loads[0]
            for m in g.members[1:]:
                before.setdefault(id(first), []).append(m.alloc)
                gone.add(id(m.alloc))
                gone.update(id(load) for load in m.loads)
        order: list[Operation] = []
        for o in ops:
            if id(o) in gone:
                continue
            order.extend(before.get(id(o), ()))
            order.append(o)
        return order

    # ----------------------------------------------------------------- the rewrite

    @staticmethod
    def rewrite(
        program: sched.ProgramOp, ops: list[Operation], order: list[Operation], groups
    ) -> None:
        """Put `ops` in `order` (`reordered`), each group's loads merged into its kept one."""
        replaced: dict[int, Operation] = {}
        for g in groups:
            for k, kept in enumerate(g.kept.loads):
                others = [m.loads[k] for m in g.members[1:]]
                deps: list[SSAValue] = []
                for load in (kept, *others):
                    deps += [d for d in load.deps if all(d is not e for e in deps)]
                merged = sched.MulticastDmaOp(kept, [m.alloc.buffer for m in g.members[1:]], deps)
                merged.location = kept.location
                for load in (kept, *others):
                    load.token.replace_all_uses_with(merged.token)
                replaced[id(kept)] = merged
        block = program.body.block
        for o in ops:
            o.detach()
        for o in order:
            block.add_op(replaced.get(id(o), o))
        for g in groups:
            for m in g.members[1:]:
                for load in m.loads:
                    load.erase()
            for load in g.kept.loads:
                load.erase()
