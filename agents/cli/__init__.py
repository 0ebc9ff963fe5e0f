"""The command line, `python -m agents <command>` (or `vtp <command>`), by command group:

    main.py        the dispatcher: one parser, each group's `register`, user errors as one line
    options.py     the one place flags are declared: config dataclass fields -> flags and back
    roles.py       the long-running roles: solver, verifier, whistleblower, submitter, aggregator
    submit.py      `submit`: the submitter with a live view of its job (an observer of it)
    node.py        `node ACTION`: an operator's own stake and pay
    adversaries.py the test adversaries' flags (--cheat, --lazy, ...), chosen here and only here
    deploy.py      `deploy`: the whole protocol on a chain
    job.py         `job build|weights`; job_chain.py: `job status|fetch` (any job on chain)
    dataset.py     `dataset pack|check`
    train.py       `train`; graph.py: `graph`
    errors.py      UserError

Each command parses once into a frozen, typed config (agents/roles/config.py for the roles) and
calls down; nothing outside this package imports it (an import-linter contract), and no module
outside it reads a parsed command line (tools/namespace_reads.py in `make lint`).
"""
