"""General models (PROTOCOL §2.5-§2.8, spec version 3): a PyTorch module's training step,
lowered once by its submitter into a committed graph of protocol operators.

- `agents/training/registry.py` (below this package, shared with the version-1 MLP engine): the
  operator set — one entry per operator: code, arity, shape rule, evaluation order, portable
  and native kernels, scalar reference and element-dependency rule.
- `graph`: the graph as data (its canonical encoding and hash).
- `lower`: PyTorch module -> traced ATen step -> protocol graph (the submitter's front end).
- `engine`: runs a committed graph; never re-traces, so no library version changes a bit.
"""
