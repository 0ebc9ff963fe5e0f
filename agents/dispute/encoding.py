"""On-chain encodings of the dispute game (PROTOCOL §7.2): node descriptors, the graph root,
the dispute config and its hash, the per-segment step list. Mirrors
contracts/dispute/lib/{DisputeTypes,OpCodes,DisputeMerkle}.sol; tests check both agree.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from eth_abi import encode

from agents.training import merkle
from agents.training.keccak import keccak256
from agents.training.registry import v1_codes

GRAPH_DOMAIN = keccak256(b"vtp.graph.v1")
STEPS_DOMAIN = keccak256(b"vtp.steps.v1")
STATE_CONFIG_DOMAIN = keccak256(b"vtp.stateconfig.v1")

# Operator codes (contracts/dispute/lib/OpCodes.sol), from the registry.
OPS: dict[str, int] = v1_codes()
OP_NAMES = {v: k for k, v in OPS.items()}

# Operand kinds.
KIND_STATE = 1
KIND_NODE = 2
KIND_DATA_X = 3
KIND_DATA_Y = 4
KIND_BATCH = 5

DTYPE_F32 = merkle.DTYPE_F32
DTYPE_U32 = merkle.DTYPE_U32

OPERAND_T = "(uint8,uint32,bytes32,uint8,uint32,uint32)"
NODE_T = f"(uint8,uint8,uint32,uint32,uint256,{OPERAND_T}[])"
CONFIG_T = "(bytes32,uint32,uint32,uint64,uint256,uint32,bytes32)"


@dataclass(frozen=True)
class Operand:
    """One input of a node: kind, state position / node index, state-name hash, header."""

    kind: int
    index: int
    name: bytes
    dtype: int
    rows: int
    cols: int

    def as_tuple(self) -> tuple:
        return (self.kind, self.index, self.name, self.dtype, self.rows, self.cols)


@dataclass(frozen=True)
class NodeDesc:
    """A node of the step graph as the chain sees it; `param` holds binary32 bits (μ, η)."""

    op: int
    dtype: int
    rows: int
    cols: int
    param: int
    inputs: tuple[Operand, ...]

    @property
    def op_name(self) -> str:
        return OP_NAMES[self.op]

    @property
    def numel(self) -> int:
        return self.rows * self.cols

    def as_tuple(self) -> tuple:
        ins = [o.as_tuple() for o in self.inputs]
        return (self.op, self.dtype, self.rows, self.cols, self.param, ins)

    def encode(self) -> bytes:
        """abi.encode(NodeDesc) as Solidity computes it."""
        return encode([NODE_T], [self.as_tuple()])

    def hash(self) -> bytes:
        return keccak256(self.encode())


def graph_root(nodes: list[NodeDesc]) -> bytes:
    """Root list under keccak256("vtp.graph.v1") of keccak256(abi.encode(node))."""
    return merkle.root_list(GRAPH_DOMAIN, [n.hash() for n in nodes])


@dataclass(frozen=True)
class DisputeConfig:
    """What a game needs about the job beyond the hook's request (PROTOCOL §7.2). On chain the
    state list is committed by its root (`state_list`): a move opens the entries it needs."""

    graph_root: bytes
    num_nodes: int
    batch_size: int
    num_examples: int
    seed: int
    state_names: tuple[bytes, ...]  # keccak256(name) per state tensor, in state order
    state_producers: tuple[int, ...]  # node producing each state tensor's next value

    @functools.cached_property
    def _entries(self) -> list[bytes]:
        return [keccak256(h + merkle.u256(p))
                for h, p in zip(self.state_names, self.state_producers, strict=True)]  # fmt: skip

    def state_entries(self) -> list[bytes]:
        """The state list's values: keccak256(abi.encode(keccak256(name), producer))."""
        return list(self._entries)

    @functools.cached_property
    def state_list(self) -> bytes:
        return merkle.root_list(STATE_CONFIG_DOMAIN, self.state_entries())

    def state_entry(self, state: int) -> tuple:
        """StateConfigEntry(name, producer, proof) of state tensor `state`."""
        proof = merkle.list_proof(STATE_CONFIG_DOMAIN, self.state_entries(), state).siblings
        return (self.state_names[state], self.state_producers[state], list(proof))

    def as_tuple(self) -> tuple:
        return (
            self.graph_root,
            self.num_nodes,
            self.batch_size,
            self.num_examples,
            self.seed,
            len(self.state_names),
            self.state_list,
        )

    def encode(self) -> bytes:
        return encode([CONFIG_T], [self.as_tuple()])

    def hash(self) -> bytes:
        return keccak256(self.encode())


def step_list_root(roots: list[bytes]) -> bytes:
    """Root list under keccak256("vtp.steps.v1") of the k + 1 state roots of a segment."""
    return merkle.root_list(STEPS_DOMAIN, roots)


def name_hash(name: str) -> bytes:
    return keccak256(name.encode())


# -- version-3 graph nodes (GraphNode / TensorInput, PROTOCOL §7.2) --------------------------

# Operand kinds of version-3 nodes (contracts/dispute/lib/OpCodes.sol KIND_*).
KIND_WORD = 6  # a hyper-parameter: the binary32 word in `key`
KIND_BATCH_X = 7  # the step's batch rows of dataset X
KIND_BATCH_Y = 8  # the step's batch labels of dataset Y
KIND_WINDOW_X = 9  # the step's token windows (inputs) of a token stream
KIND_WINDOW_Y = 10  # the step's token windows (targets, shifted by one)
KIND_CONST = 11  # a constant tensor, its tensor root in `key`
KIND_STEP = 12  # the step input (k0, k1, t): computed on chain from the seed and the step
# an aggregation graph's (S, numel) stack of the round's unit states' tensor `index` (its name's
# hash in `key`): row s is opened in unit s's final state, entry s of the claim's units list
KIND_UNITS = 13
UNITS_DOMAIN = keccak256(b"vtp.units.v1")

FIRST_V3 = 64  # a descriptor whose op code is at least this is a GraphNode
INPUT_T = "(uint8,uint32,bytes32,uint8,uint32[])"
GRAPH_NODE_T = f"(uint8,uint8,uint32[],uint256[],{INPUT_T}[])"


@dataclass(frozen=True)
class TensorInput:
    """One input of a version-3 node: kind, state position / node index, key, N-d header."""

    kind: int
    index: int
    key: bytes
    dtype: int
    shape: tuple[int, ...]

    def as_tuple(self) -> tuple:
        return (self.kind, self.index, self.key, self.dtype, list(self.shape))


@dataclass(frozen=True)
class GraphNode:
    """A version-3 node as the chain sees it (a registry operator, code 64 and up)."""

    op: int
    dtype: int
    shape: tuple[int, ...]
    attrs: tuple[int, ...]
    inputs: tuple[TensorInput, ...]

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def rows(self) -> int:
        return view2d_shape(self.shape)[0]

    @property
    def cols(self) -> int:
        return view2d_shape(self.shape)[1]

    def as_tuple(self) -> tuple:
        ins = [i.as_tuple() for i in self.inputs]
        return (self.op, self.dtype, list(self.shape), list(self.attrs), ins)

    def encode(self) -> bytes:
        """abi.encode(GraphNode) as Solidity computes it."""
        return encode([GRAPH_NODE_T], [self.as_tuple()])

    def hash(self) -> bytes:
        return keccak256(self.encode())


def view2d_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    """The committed 2-D view of an N-d shape (agents/model/job.py view2d; Shapes.view2d)."""
    if not shape:
        return 1, 1
    if len(shape) == 1:
        return 1, shape[0]
    cols = 1
    for s in shape[1:]:
        cols *= s
    return shape[0], cols
