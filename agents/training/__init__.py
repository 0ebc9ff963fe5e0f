"""Reproducible training engine of the verifiable training protocol (docs/PROTOCOL.md §1-§5).

One concept per module:
  float32    binary32 bit helpers and the protocol's constants (as bit patterns)
  reference  scalar, line-by-line reference of every operator and of a whole step (the model
             the Solidity library mirrors)
  ops        the operators on torch tensors, portable (CPU and CUDA), fixed evaluation order
  fastops    the same reductions / exp / log / relu on C kernels (kernels.c, native.py)
  registry   every operator once: codes, evaluation orders, kernels, references, dependencies
  keccak     keccak-256, C batch hasher with a pycryptodome fallback
  merkle     tensor roots, root lists (state, checkpoints, op trace, dataset), proofs
  spec       the job spec: canonical JSON, validation, spec hash
  data       named datasets, dataset root, batch schedule
  tokens     token-stream datasets (the shakespeare-char corpus) and their window schedule
  state      state tensor names / order, deterministic initial state, state root
  graph      one training step as a fixed node list (each node's operator in the registry)
  engine     runs steps (fast or traced), whole jobs, accuracy
  decompose  spec v2: R rounds x S shards of local SGD, shard batches, aggregation, roots
"""
