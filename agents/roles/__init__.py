"""The protocol's roles — submitter, solver, verifier, whistleblower, aggregator (and the `node`
command) — one process each, one module each.

`config` holds each role's frozen settings (one dataclass per role, every default once: a role
is built from its config, never from a parsed command line); `logic` holds each role's pure
decision functions; `runner` the shared I/O loop; one module per role composes them with
agents/core (chain, tx, store, blobs), agents/data and agents/training / dispute. No role module
imports another (`make lint` checks it): what two roles share lives in a non-role module here —
`challenge` (the challengers' replay and game play), `aggregation` (pure aggregation fraud
proofs), `decomposed` (decomposed jobs), `jobs`, `artifacts`, `addresses`, `errors`,
`forced_reveal`, `config`.
"""
