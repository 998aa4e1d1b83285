"""Fusion: group IR nodes into kernels, then order kernels and extern calls.

A group iterates one canonical domain: sizes `c0, c1, ...` (size-1 dims dropped) of which some
are reduced (`reduced[k]`). Members play one of four roles:

* `full`      - a pointwise node over the whole domain (a prologue or epilogue of the reductions)
* `reduction` - a reduction over the group's reduced dims
* `out`       - a pointwise node over the non-reduced dims only (e.g. `rstd = rsqrt(var + eps)`)
* `scan`      - a scan along the group's one reduced dim (cumsum: a full-size result, after the
                group's reductions; only `full` members join after it)

A node joins a group when its domain matches one of these roles, when every value it reads from
the group is read at the very position the group computes it (so the value can stay in registers),
and when joining creates no cycle through nodes outside the group (Inductor's rules, simplified).
Softmax, layer_norm and rms_norm therefore become one group each, with their pointwise
neighbours. A node writing into a graph input (input mutation; an aten `copy_` into a host input)
must run after every reader of it;
writes into inputs of one shape fuse with each other even when they share nothing (horizontally).
A scatter (ScatterNode: values added at loaded positions) runs alone, as two kernels
(`scatter_groups`); what computes its values is inlined into the second, as into any kernel.
"""
from __future__ import annotations

import dataclasses
import functools
import heapq
from typing import Optional, Union

from .ir import (Affine, Buffer, ExternNode, PointwiseNode, ReductionNode, ScanNode, ScatterNode, at_position,
                 loads, substitute_index)

MAX_GROUP_MEMBERS = 64
Node = Union[PointwiseNode, ReductionNode, ScanNode, ScatterNode, ExternNode]


@dataclasses.dataclass(eq=False)
class Member:
    node: Union[PointwiseNode, ReductionNode, ScanNode]
    role: str                        # "full" | "reduction" | "out" | "scan"
    body: object                     # the node's Expr, in canonical variables
    store: Affine                    # where its value lands in its buffer, in canonical variables

    @functools.cached_property
    def loads(self) -> list:
        """The loads of its body (asked for each member each time the group grows)."""
        return loads([self.body])


@dataclasses.dataclass(eq=False)
class Group:
    sizes: tuple[int, ...]
    reduced: tuple[bool, ...]
    members: list[Member]
    stores: list[Member] = dataclasses.field(default_factory=list)   # filled by `schedule`

    @property
    def is_reduction(self) -> bool:
        return any(self.reduced)

    @property
    def is_scan(self) -> bool:
        """Does the group hold a scan (after which only its pointwise consumers join: `fit`)?"""
        return any(m.role == "scan" for m in self.members)

    @property
    def out_sizes(self) -> tuple[int, ...]:
        return tuple(s for s, r in zip(self.sizes, self.reduced) if not r)

    def names(self) -> set[str]:
        return {m.node.name for m in self.members}


# ---------------------------------------------------------------------------------------------
# domains and variable maps
# ---------------------------------------------------------------------------------------------

def _nonone(sizes) -> list[int]:
    return [k for k, s in enumerate(sizes) if s != 1]


def _full_map(sizes) -> dict[str, Affine]:
    mapping = {f"v{k}": Affine(0) for k in range(len(sizes))}
    for pos, k in enumerate(_nonone(sizes)):
        mapping[f"v{k}"] = Affine.var(f"c{pos}")
    return mapping


def _out_map(sizes, group_reduced) -> dict[str, Affine]:
    out_positions = [p for p, r in enumerate(group_reduced) if not r]
    mapping = {f"v{k}": Affine(0) for k in range(len(sizes))}
    for j, k in enumerate(_nonone(sizes)):
        mapping[f"v{k}"] = Affine.var(f"c{out_positions[j]}")
    return mapping


def _coarse_map(sizes, domain, positions) -> Optional[dict[str, Affine]]:
    """Variables of a node over `sizes` as the group's canonical variables `c{positions[j]}`
    (sizes `domain`) when each of the node's dims is a run of neighbouring domain dims merged
    row-major (a node over x's (N, C, H, W) in a group over (N, G, C/G, H, W): `c = C/G*g + j`):
    each element of the node is then computed by the lane of the domain element it is. None
    when the dims do not line up so."""
    mapping = {f"v{k}": Affine(0) for k in range(len(sizes))}
    j = 0
    for k in _nonone(sizes):
        run, numel = [], 1
        while j < len(domain) and numel < sizes[k]:
            run.append(j)
            numel *= domain[j]
            j += 1
        if numel != sizes[k]:
            return None
        index, stride = Affine(0), 1
        for p in reversed(run):
            index = index + Affine.var(f"c{positions[p]}", stride)
            stride *= domain[p]
        mapping[f"v{k}"] = index
    return mapping if j == len(domain) else None


def _key(sizes) -> tuple[int, ...]:
    return tuple(sizes[k] for k in _nonone(sizes))


def _reduction_shape(node) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    """A reduction's or scan's domain without its size-1 dims, and which dims it reduces (scans)."""
    keep = _nonone(node.sizes)
    reduced = node.reduced if isinstance(node, ReductionNode) else (node.dim,)
    return tuple(node.sizes[k] for k in keep), tuple(k in reduced for k in keep)


def _make_member(node, role: str, mapping: dict[str, Affine]) -> Member:
    from .ir import domain_vars
    body = substitute_index([node.body], mapping)[0]
    if isinstance(node, ReductionNode):
        buf_index = tuple(Affine(0) if k in node.reduced else v
                          for k, v in enumerate(domain_vars(len(node.sizes))))
    else:
        buf_index = domain_vars(len(node.sizes))
    store = node.buffer.store_index(buf_index).substitute(mapping)
    return Member(node, role, body, store)


def fit(group: Group, node) -> Optional[Member]:
    """The member `node` would be in `group`, or None when the domains do not match. A scan
    joins a group of reductions along its dim (`softmax(x).cumsum(-1)`: the row's statistics,
    then its scan, from one read), or starts its own; only pointwise nodes over its whole domain
    join a group with a scan (its consumers: `cumsum(x) - 1`), and other scans of the same rows
    (cummax and cummin of one input, a scan of a scan)."""
    if isinstance(node, ScanNode):
        if group.is_reduction and _reduction_shape(node) == (group.sizes, group.reduced):
            return _make_member(node, "scan", _full_map(node.sizes))
        return None
    if group.is_scan:
        if isinstance(node, PointwiseNode) and _key(node.sizes) == group.sizes:
            return _make_member(node, "full", _full_map(node.sizes))
        return None
    if isinstance(node, ReductionNode):
        sizes, reduced = _reduction_shape(node)
        if sizes == group.sizes and (reduced == group.reduced or not group.is_reduction):
            return _make_member(node, "reduction", _full_map(node.sizes))
        return None
    key = _key(node.sizes)
    if key == group.sizes:
        return _make_member(node, "full", _full_map(node.sizes))
    if group.is_reduction and key == group.out_sizes:
        return _make_member(node, "out", _out_map(node.sizes, group.reduced))
    if len(key) < len(group.sizes):
        mapping = _coarse_map(node.sizes, group.sizes, range(len(group.sizes)))
        if mapping is not None:
            return _make_member(node, "full", mapping)
        out = [p for p, r in enumerate(group.reduced) if not r]
        if group.is_reduction and len(key) < len(out):
            mapping = _coarse_map(node.sizes, group.out_sizes, out)
            if mapping is not None:
                return _make_member(node, "out", mapping)
    return None


def scatter_groups(node: ScatterNode) -> list[Group]:
    """The two kernels of a scatter: one stores `init` over the buffer, the other (over the values'
    domain) adds each value at its position (Op.SCATTER_ADD, atomic). The second must not start
    before the first is done, which two launches on one stream give."""
    init = new_group(PointwiseNode(node.buffer, node.init))
    mapping = _full_map(node.sizes)
    key = _key(node.sizes)
    add = Member(node, "full", substitute_index([node.store_expr()], mapping)[0], node.index.substitute(mapping))
    groups = [init, Group(key, (False,) * len(key), [add])]
    for g in groups:
        g.stores = list(g.members)
    return groups


def new_group(node) -> Group:
    if isinstance(node, ScanNode):
        sizes, reduced = _reduction_shape(node)
        return Group(sizes, reduced, [_make_member(node, "scan", _full_map(node.sizes))])
    if isinstance(node, ReductionNode):
        sizes, reduced = _reduction_shape(node)
        return Group(sizes, reduced, [_make_member(node, "reduction", _full_map(node.sizes))])
    key = _key(node.sizes)
    return Group(key, (False,) * len(key), [_make_member(node, "full", _full_map(node.sizes))])


# ---------------------------------------------------------------------------------------------
# legality
# ---------------------------------------------------------------------------------------------

def _reads_match(group: Group, member: Member) -> bool:
    """Every read of a group-produced buffer happens where the group computes that value."""
    produced = {m.node.name: m for m in group.members}
    for ld in member.loads:
        producer = produced.get(ld.arg[0])
        if producer is None:
            continue
        if ld.args or not at_position(ld, producer.store):   # masked, gathered or elsewhere
            return False
        if producer.role == "full" and member.role == "out":
            return False
    return True


def _mutation_ok(group: Group, member: Member) -> bool:
    """A member writing a graph input may join only if the group reads that input solely at
    the position being written (each element is read, then written, by the same lane: the
    kernel computes every value before it stores any), masked or not. The group holds this
    already, so only the pairs `member` is in are checked (a whole-group check per candidate
    made scheduling a ResNet's 161-parameter SGD step cubic: seconds of its first call)."""
    def reads_elsewhere(m: Member, written: dict[str, Affine]) -> bool:
        return any(ld.arg[0] in written and not at_position(ld, written[ld.arg[0]]) for ld in m.loads)
    writes = member.node.buffer.kind == "input"
    written = {m.node.name: m.store for m in group.members if m.node.buffer.kind == "input"}
    if writes:
        written[member.node.name] = member.store
        mine = {member.node.name: member.store}
        if any(reads_elsewhere(m, mine) for m in group.members):
            return False
    return not reads_elsewhere(member, written)


class Scheduler:
    def __init__(self, nodes: list[Node], keep: set[str]):
        self.nodes = nodes
        self.keep = keep                                   # buffers needed after the graph
        self.producer: dict[str, Node] = {}
        self.deps: dict[int, set[int]] = {}                # node index -> direct dependencies
        self.ancestors: dict[int, set[int]] = {}
        self.index = {id(n): i for i, n in enumerate(nodes)}
        self._build_deps()

    def _build_deps(self):
        readers: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            deps = set()
            for name in node.reads():
                if name in self.producer:
                    deps.add(self.index[id(self.producer[name])])
                readers.setdefault(name, []).append(i)
            written = _written_input(node)
            if written is not None:
                deps.update(j for j in readers.get(written, []) if j != i)   # write after read
            if not _writes_input(node):
                for out in _outputs(node):
                    self.producer[out.name] = node
            deps.discard(i)
            self.deps[i] = deps
            anc = set(deps)
            for d in deps:
                anc |= self.ancestors[d]
            self.ancestors[i] = anc

    def run(self) -> list[Union[Group, ExternNode, ScatterNode]]:
        groups: list[Group] = []
        self.item_of: dict[int, object] = {}               # node index -> its Group or ExternNode
        self.dependents: dict[int, set] = {}               # id(item) -> items that depend on it
        self.items: dict[int, object] = {}
        # where `_candidates` looks (id(group) keys; a group's number is its creation order)
        self._number: dict[int, int] = {}
        self._reading: dict[str, set[int]] = {}            # buffer -> groups with a member reading it
        self._fed_by: dict[int, set[int]] = {}             # id(item) -> groups with a member depending on it
        self._writing: set[int] = set()                    # groups with a member writing a graph input
        for i, node in enumerate(self.nodes):
            target = None
            member = None
            if not isinstance(node, (ExternNode, ScatterNode)):    # (those run alone)
                for g in self._candidates(i):
                    member = fit(g, node)
                    if member is None or len(g.members) >= MAX_GROUP_MEMBERS:
                        continue
                    if not _reads_match(g, member) or not _mutation_ok(g, member):
                        continue
                    if self._creates_cycle(i, g):
                        continue
                    target = g
                    break
                if target is None:
                    target = new_group(node)
                    self._number[id(target)] = len(groups)
                    groups.append(target)
                else:
                    if member.role == "reduction" and not target.is_reduction:
                        target.reduced = _reduction_shape(node)[1]
                    target.members.append(member)
            else:
                target = node
            self._place(i, target)
        self._mark_stores(groups)
        ordered = self._order()
        self._check_writes_after_reads(ordered)
        return ordered

    def _place(self, i: int, item):
        self.item_of[i] = item
        self.items.setdefault(id(item), item)
        self.dependents.setdefault(id(item), set())
        for d in self.deps[i]:
            src = self.item_of[d]
            if src is not item:
                self.dependents[id(src)].add(id(item))
        if isinstance(item, Group):
            for name in self.nodes[i].reads():
                self._reading.setdefault(name, set()).add(id(item))
            for d in self.deps[i]:
                self._fed_by.setdefault(id(self.item_of[d]), set()).add(id(item))
            if _writes_input(self.nodes[i]):
                self._writing.add(id(item))

    def _candidates(self, i: int) -> list[Group]:
        """Groups producing what node i reads (latest first), then, latest first, groups reading
        the same inputs or reading what the same kernels produce (the second passes of split
        reductions, side by side) and, for a write into a graph input, groups writing other
        inputs (an optimizer step over many same-shaped parameters becomes one kernel, not one
        per parameter). Looked up in indexes `_place` keeps, not by walking every group."""
        seen, out = set(), []
        for d in sorted(self.deps[i], reverse=True):
            g = self.item_of.get(d)
            if isinstance(g, Group) and id(g) not in seen:
                seen.add(id(g))
                out.append(g)
        found: set[int] = set()
        for name in self.nodes[i].reads():
            found |= self._reading.get(name, set())
        for d in self.deps[i]:
            found |= self._fed_by.get(id(self.item_of[d]), set())
        if _writes_input(self.nodes[i]):
            found |= self._writing
        later = sorted(found - seen, key=self._number.__getitem__, reverse=True)
        return out + [self.items[k] for k in later]

    def _creates_cycle(self, i: int, g: Group) -> bool:
        """Would putting node i into g make g (transitively) depend on itself?"""
        sources = {id(self.item_of[d]) for d in self.deps[i]} - {id(g)}
        if not sources:
            return False
        stack, seen = [id(g)], {id(g)}
        while stack:
            for nxt in self.dependents.get(stack.pop(), ()):
                if nxt in sources:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    def _mark_stores(self, groups: list[Group]):
        needed_outside: set[str] = set(self.keep)
        for i, node in enumerate(self.nodes):
            for name in node.reads():
                p = self.producer.get(name)
                if p is None or self.item_of[self.index[id(p)]] is not self.item_of[i]:
                    needed_outside.add(name)
        for g in groups:
            g.stores = [m for m in g.members
                        if m.node.name in needed_outside or m.node.buffer.kind == "input"]

    def _check_writes_after_reads(self, ordered):
        """Every read of a graph input means its value before the graph: each write into an input
        must come after every reader in another kernel (same kernel: each lane reads, then
        writes). Write-backs that read each other must have been fused; if not, refuse."""
        position = {id(item): k for k, item in enumerate(ordered)}
        readers: dict[str, list[int]] = {}
        for j, node in enumerate(self.nodes):
            for name in node.reads():
                readers.setdefault(name, []).append(j)
        for i, node in enumerate(self.nodes):
            written = _written_input(node)
            if written is None:
                continue
            mine = self.item_of[i]
            for j in readers.get(written, ()):
                if self.item_of[j] is not mine and position[id(self.item_of[j])] > position[id(mine)]:
                    raise NotImplementedError(f"write into {node.name} before a kernel that reads its old value")

    def _order(self) -> list[Union[Group, ExternNode, ScatterNode]]:
        """Topological order of groups and externs; among ready items, the earliest first."""
        first: dict[int, int] = {}
        for i in range(len(self.nodes)):
            first.setdefault(id(self.item_of[i]), i)
        indegree = {k: 0 for k in self.items}
        for k, outs in self.dependents.items():
            for o in outs:
                indegree[o] += 1
        ready = sorted((first[k], k) for k, n in indegree.items() if n == 0)
        ordered = []
        heapq.heapify(ready)
        while ready:
            _, k = heapq.heappop(ready)
            ordered.append(self.items[k])
            for o in self.dependents[k]:
                indegree[o] -= 1
                if indegree[o] == 0:
                    heapq.heappush(ready, (first[o], o))
        if len(ordered) != len(self.items):
            raise RuntimeError("cycle between fused kernels")
        return ordered


def _writes_input(node) -> bool:
    return isinstance(node, PointwiseNode) and node.buffer.kind == "input"


def _written_input(node) -> Optional[str]:
    """The graph input `node` writes: a kernel's store, or an aten `copy_` (a host input), or None."""
    if _writes_input(node):
        return node.name
    return node.mutates if isinstance(node, ExternNode) else None


def _outputs(node) -> list[Buffer]:
    if isinstance(node, ExternNode):
        return [b for b in node.outputs if b is not None]
    return [node.buffer]


def schedule(nodes: list[Node], keep: set[str]) -> list[Union[Group, ExternNode, ScatterNode]]:
    return Scheduler(nodes, keep).run()
