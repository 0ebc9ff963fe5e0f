"""Off-chain half of the verifiable training protocol.

`agents.training` is the reproducible engine (pure torch, no chain code), `agents.core` is chain
access, persistence and blob storage (no role logic), and the role modules compose the two.
"""

__version__ = "0.1.0"
