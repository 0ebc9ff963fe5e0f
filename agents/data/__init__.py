"""Datasets, in one place: the built-in classification sets (builtin.py), the token corpora
(tokens.py), packed user datasets (packed.py: the manifest and its chunk Merkle maths), their
checked, cached chunk fetch (chunks.py, over agents/core/blobs.py's plain stores), and the one
resolver of a dataset name (datasets.py).

Layering (import-linter contracts in pyproject.toml): the roles, the model front end and the
CLI call this package; it calls nothing above it (no role, no chain code, no CLI). It builds
on the training package's pure primitives (Merkle roots, keccak, the seeded batch schedule),
and the training engine imports none of it: it is handed a dataset.
"""
