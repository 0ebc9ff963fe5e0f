"""`python -m agents explore`: a read-only web explorer of a deployment (issue #44).

It reads the chain through the agents' typed bindings (agents/core/bindings.py) and the JobLens,
follows new events with the agents' event stream (agents/core/events.py) and pushes them to the
browser as server-sent events, and reads the published blobs (specs, manifests, checkpoints)
with the roles' checks against the roots the chain holds. It signs nothing and holds no key.

Layout: `config` (the frozen start-up config and the deployment), `reads` (chain reads),
`published` (blob reads), `index` (the live job index and the event fan-out), `job` (a job's
page: units, commitments, history, slashes and credits), `dispute` (a dispute game as a path
and a proof), `provenance` (which module a graph node came from), `app` (the Starlette pages)
and `server` (uvicorn). Nothing in the agents imports it (`[tool.importlinter]`).
"""
