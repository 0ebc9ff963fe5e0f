"""The protocol's roles — submitter, solver, verifier, whistleblower — one process each.

`logic` holds each role's pure decision functions; `runner` the shared I/O loop; one module per
role composes them with agents/core (chain, tx, store, blobs) and agents/training / dispute.
"""
