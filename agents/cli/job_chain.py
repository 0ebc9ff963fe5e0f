"""`python -m agents job status|fetch ID`: any job on chain, read by anyone (no key).

`job status` reads the job once: its phase, escrow, each unit's phase and the chain time left
in the window it waits on, the disputes and their winners (agents/roles/job_view.py renders
them). `job fetch` downloads a completed job's final checkpoint from the blob store its
commitment names, checks it against the chain (manifest, state, committed final root) and
writes the model's weights as a safetensors `state_dict`, with the model's held-out metric: a
version-1 MLP under `torch.nn.Sequential`'s names with its test accuracy; a version-3 model
(`job build`'s PyTorch module) under the module's own names, so `load_state_dict` takes it,
with its test accuracy (classification) or validation loss (language model). A checkpoint that
does not check is one error line, exit 2, and nothing is written.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.cli.errors import UserError
from agents.core.config import DEFAULT_DEPLOYMENT


def register_chain(jsub: argparse._SubParsersAction) -> None:
    s = jsub.add_parser("status", help="read a job's state from chain (units, disputes, windows)")
    _chain_args(s)
    s.add_argument(
        "--decomposed",
        action="store_true",
        help="ID is a round manager's decomposed job: its rounds, their units and aggregates",
    )
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=run_status)
    f = jsub.add_parser("fetch", help="download a completed job's model, checked against chain")
    _chain_args(f)
    f.add_argument("--out", required=True, help="the weights file to write (model.safetensors)")
    f.add_argument(
        "--spec-store",
        action="append",
        default=[],
        metavar="URL",
        help="a blob store holding the job's spec (tried before the store of the solver's "
        "commitment, which keeps a copy)",
    )
    f.add_argument(
        "--allow-local-locators",
        action="store_true",
        help="dev chains only: also read a commitment's blobs from a local folder it names",
    )
    f.add_argument(
        "--decomposed",
        action="store_true",
        help="ID is a round manager's decomposed job: fetch its result G_R (the step state of "
        "its final round state H_R)",
    )
    f.add_argument("--json", action="store_true", help="print one JSON object")
    f.set_defaults(func=run_fetch)


def _chain_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=int, metavar="ID", help="the job id (JobPosted's jobId)")
    p.add_argument(
        "--deployment",
        default=DEFAULT_DEPLOYMENT,
        type=Path,
        help="deployment file written by `deploy` (default: %(default)s)",
    )
    p.add_argument("--rpc-url", help="the chain's JSON-RPC URL (default: the deployment's)")


@contextlib.asynccontextmanager
async def job_reader(args: argparse.Namespace) -> AsyncIterator[tuple[Any, Any]]:
    """(AsyncWeb3, JobReader) of the job in args, disconnected on exit; a RoleError of a read
    inside (no such job, no commitment) is the user's one-line UserError."""
    from agents.roles.errors import RoleError

    w3, reader = await open_reader(args)
    try:
        yield w3, reader
    except RoleError as exc:
        raise UserError(str(exc)) from None
    finally:
        await w3.provider.disconnect()


async def open_reader(args: argparse.Namespace):
    """(AsyncWeb3, JobReader) of the job in args, from the deployment file; UserError otherwise.
    The caller disconnects the client (`await w3.provider.disconnect()`)."""
    from web3 import Web3

    from agents.core.bindings import bind
    from agents.core.chain import ChainUnavailable, async_connect
    from agents.roles.job_reads import JobReader

    if args.job_id <= 0:
        raise UserError(f"job id must be > 0, got {args.job_id}")
    path = Path(args.deployment)
    try:
        record = json.loads(path.read_text())
        manager = Web3.to_checksum_address(record["contracts"]["JobManager"])
    except FileNotFoundError:
        raise UserError(f"--deployment {path}: no such file (run `deploy` first)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"--deployment {path}: not a deployment file ({exc})") from None
    url = args.rpc_url or record.get("rpc_url")
    if not url:
        raise UserError(f"--deployment {path} names no rpc_url: pass --rpc-url")
    try:
        w3 = await async_connect(url)
    except (ChainUnavailable, OSError) as exc:
        raise UserError(f"--rpc-url {url}: no chain there ({exc})") from None
    if not await w3.eth.get_code(manager):
        await w3.provider.disconnect()
        raise UserError(f"no JobManager at {manager} on {url} (another chain's deployment?)")
    contract = bind(w3, "JobManager", manager)
    return w3, JobReader(w3, contract, args.job_id, int(record.get("block", 0)))


def run_status(args: argparse.Namespace) -> int:
    from agents.roles.job_view import facts_json, render_rich, render_text

    if args.decomposed:
        facts = asyncio.run(_round_facts(args))
        print(json.dumps(facts) if args.json else _round_text(facts))
        return 0

    async def read() -> Any:
        async with job_reader(args) as (_, reader):
            return await reader.read()

    facts = asyncio.run(read())
    if args.json:
        print(json.dumps(facts_json(facts)))
    elif sys.stdout.isatty():
        from rich.console import Console

        Console().print(render_rich(facts))
    else:
        print(render_text(facts))
    return 0


@dataclass(frozen=True)
class Fetched:
    """A completed job's model, checked against the chain: its weights as the module's
    `state_dict`, its state root, its held-out metric and the last batch loss."""

    weights: dict
    state_root: bytes
    metrics: dict[str, float]
    final_loss: float | None
    meta: dict | None = None  # a version-3 bundle's meta (a Hugging Face model's config)


def run_fetch(args: argparse.Namespace) -> int:
    from agents.core.blobs import open_blob_store
    from agents.core.enums import JobStatus
    from agents.core.keys import DEV_CHAIN_IDS
    from agents.roles.artifacts import BadBlob, locator_store, parse_locator
    from agents.roles.errors import RoleError
    from agents.roles.jobs import JobRejected, fetch_spec
    from agents.training.spec import SPEC_VERSION, ModelSpec

    if args.decomposed:
        return _print_fetched(args, f"decomposed job {args.job_id}", _fetch_decomposed(args))
    what = f"job {args.job_id}"

    async def read() -> tuple[Any, Any]:
        """The completed job's record and its one unit's commitment (UserError otherwise)."""
        async with job_reader(args) as (w3, reader):
            chain_id = await w3.eth.chain_id
            if args.allow_local_locators and chain_id not in DEV_CHAIN_IDS:
                raise UserError(f"--allow-local-locators: chain id {chain_id} is not a dev chain")
            job = await reader.job()
            status = JobStatus(job.status)
            if status != JobStatus.COMPLETED:
                raise UserError(f"{what} is {status.name.lower()}: it has no final model")
            units = await reader.unit_ids(int(job.unitCount))
            if len(units) != 1:
                raise UserError(
                    f"{what} has {len(units)} units: fetch reads a one-unit job's model"
                )
            return job, await reader.commitment(units[0])

    job, c = asyncio.run(read())
    try:
        stores = [open_blob_store(url) for url in args.spec_store]
        try:
            stores.append(locator_store(parse_locator(c.locator)[0], args.allow_local_locators))
        except BadBlob as exc:
            raise UserError(f"{what}: {exc}") from None
        for held in c.holders:  # the holders of the result keep the job's spec and model too
            with contextlib.suppress(BadBlob):
                stores.append(locator_store(parse_locator(held)[0], args.allow_local_locators))
        spec = fetch_spec(bytes(job.specHash), stores, what)
        if isinstance(spec, ModelSpec):
            got = _fetch_model(spec, job, stores, c, args.allow_local_locators, what)
        elif spec.version == SPEC_VERSION:
            got = _fetch_mlp(spec, job, c, args.allow_local_locators, what)
        else:
            raise UserError(f"{what} runs a version-{spec.version} spec: fetch reads versions "
                            f"{SPEC_VERSION} and 3")  # fmt: skip
    except (RoleError, JobRejected) as exc:
        raise UserError(str(exc)) from None
    except BadBlob as exc:
        raise UserError(
            f"{what}: the final checkpoint does not check against the chain: {exc}"
        ) from None
    return _print_fetched(args, what, got)


def _print_fetched(args: argparse.Namespace, what: str, got: Fetched) -> int:
    """Write the fetched weights to --out and say what was fetched (one line, or --json)."""
    write_weights(got.weights, args.out, got.meta)
    out = {
        "job_id": args.job_id,
        "out": args.out,
        "tensors": len(got.weights),
        "state_root": "0x" + got.state_root.hex(),
        **{k: got.metrics.get(k) for k in ("test_accuracy", "val_loss") if k in got.metrics},
        "final_loss": got.final_loss,
    }
    if "test_accuracy" not in out and "val_loss" not in out:
        out["test_accuracy"] = None  # no held-out split: said as version 1 always said it
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"{what}: wrote {args.out} ({len(got.weights)} tensors), state root "
            f"{out['state_root']} matches the chain; {metric_words(got.metrics)}"
        )
    return 0


def metric_words(metrics: dict[str, float]) -> str:
    """The held-out metric in words: "test accuracy 0.9610" or "val loss 2.3456"."""
    if "val_loss" in metrics:
        return f"val loss {metrics['val_loss']:.4f}"
    if "test_accuracy" in metrics:
        return f"test accuracy {metrics['test_accuracy']:.4f}"
    return "test accuracy n/a (no test split)"


def _fetch_mlp(spec, job: Any, c, local_ok: bool, what: str) -> Fetched:
    """A version-1 job (`job`: IJobManager.Job, decoded by name): the MLP's checkpoint, as
    `torch.nn.Sequential` names its layers."""
    from agents.data import datasets
    from agents.roles.artifacts import read_result
    from agents.training.engine import Engine
    from agents.training.state import state_root, torch_state_dict

    st, losses = read_result(spec, c.locator, c.published_root, c.final_root, c.holders, local_ok)
    data = datasets.load_dataset(spec.dataset_name)  # a version-1 spec: built-in data only
    if data.root() != bytes(job.datasetRoot):
        raise UserError(f"{what}: dataset {spec.dataset_name} differs from the chain's root")
    test = datasets.held_out(data)
    metrics = {} if test is None else {"test_accuracy": Engine(spec, data).accuracy(st, test)}
    return Fetched(torch_state_dict(st, spec.widths), state_root(st), metrics,
                   losses[-1] if losses else None)  # fmt: skip


def _fetch_model(spec, job: Any, stores: list, c, local_ok: bool, what: str) -> Fetched:
    """A version-3 job: its model bundle and S_0 from the stores (each checked against the spec
    and the chain, as a solver loads it), the final checkpoint checked against the committed
    root, the weights under the PyTorch module's own names, and the held-out metric from the
    committed forward graph."""
    from agents.model.job import MAX_PARAMS, module_state_dict, state_root
    from agents.roles.artifacts import read_result
    from agents.roles.runtime import ChainJob, job_runtime

    chain = ChainJob(int(job.steps), int(job.checkpointInterval),
                     bytes(job.datasetRoot), bytes(job.initialStateRoot))  # fmt: skip
    rt = job_runtime(spec, chain, stores, what, MAX_PARAMS, None)
    st, losses = read_result(rt, c.locator, c.published_root, c.final_root, c.holders, local_ok)
    return Fetched(module_state_dict(rt.job.bundle, st), state_root(st), rt.metrics(st),
                   losses[-1] if losses else None, rt.job.bundle.meta)  # fmt: skip


def _round_manager_address(args: argparse.Namespace, what: str) -> str:
    """The deployment's RoundManager (after open_reader checked the file); UserError without."""
    record = json.loads(Path(args.deployment).read_text())
    address = record["contracts"].get("RoundManager")
    if not address:
        raise UserError(f"--deployment {args.deployment} has no RoundManager: {what} is none")
    return address


async def _round_job(w3: Any, args: argparse.Namespace, what: str) -> tuple[Any, Any]:
    """(RoundManager, IRoundManager.Job) of the decomposed job in args; UserError if none."""
    from agents.core.bindings import bind

    rm = bind(w3, "RoundManager", _round_manager_address(args, what))
    if not 0 < args.job_id <= await rm.functions.jobCount().call():
        raise UserError(f"{what}: no such job on the round manager")
    return rm, await rm.functions.getJob(args.job_id).call()


async def _round_facts(args: argparse.Namespace) -> dict:
    """A decomposed job's rounds as `job status --decomposed` shows them: each round's
    aggregation (status, attempt, aggregator, root) and its units (status, solver, attempt)."""
    from agents.core.enums import RoundJobStatus, RoundStatus, UnitStatus

    what = f"decomposed job {args.job_id}"
    w3, reader = await open_reader(args)
    try:
        rm, job = await _round_job(w3, args, what)
        manager = reader.manager
        p = job.params
        rounds = []
        for r in range(int(p.rounds)):
            rnd = await rm.functions.getRound(args.job_id, r).call()
            units = []
            for s in range(int(p.shards)):
                unit_job = await rm.functions.unitJobOf(args.job_id, r, s).call()
                if unit_job == 0:
                    continue  # the round is not posted yet
                u = await manager.functions.getUnit(unit_job << 32).call()
                units.append({"shard": s, "job_id": unit_job,
                              "status": UnitStatus(u.status).name.lower(),
                              "solver": u.assignee, "attempt": int(u.attempt)})  # fmt: skip
            rounds.append({
                "round": r, "status": RoundStatus(rnd.status).name.lower(),
                "attempt": int(rnd.attempt), "aggregator": rnd.aggregator,
                "aggregate_root": "0x" + bytes(rnd.aggregateRoot).hex(), "units": units,
            })  # fmt: skip
        return {
            "job_id": args.job_id,
            "status": RoundJobStatus(job.status).name.lower(),
            "version": 2 if bytes(p.aggregationConfigHash) == bytes(32) else 3,
            "rounds": int(p.rounds),
            "shards": int(p.shards),
            "local_steps": int(p.localSteps),
            "current_round": int(job.currentRound),
            "round_states": rounds,
        }
    finally:
        await w3.provider.disconnect()


def _round_text(f: dict) -> str:
    """`_round_facts` in lines: the job, then one line a round."""
    lines = [
        f"decomposed job {f['job_id']}: {f['status']}, version {f['version']}, {f['rounds']} "
        f"rounds x {f['shards']} shards of {f['local_steps']} steps (round {f['current_round']})"
    ]
    for r in f["round_states"]:
        units = ", ".join(f"{u['shard']} {u['status']} (job {u['job_id']}, attempt "
                          f"{u['attempt']})" for u in r["units"]) or "not posted"  # fmt: skip
        agg = "" if r["status"] in ("none", "training") else (
            f", aggregate {r['aggregate_root'][:18]}… by {r['aggregator']}"
        )  # fmt: skip
        lines.append(f"  round {r['round']}: {r['status']} (attempt {r['attempt']}){agg}; "
                     f"units: {units}")  # fmt: skip
    return "\n".join(lines)


def _fetch_decomposed(args: argparse.Namespace) -> Fetched:
    """A completed decomposed version-3 job's result: H_R from the blob its final aggregate was
    committed with, checked against the round manager's globalRoot(job, R), the job checked as
    a role loads it (runtime.decomposed_runtime); G_R (H_R's step state) under the module's
    own names, with its held-out metric."""
    from agents.core.blobs import BlobError, open_blob_store
    from agents.core.enums import RoundJobStatus
    from agents.model.job import MAX_PARAMS, module_state_dict
    from agents.roles.artifacts import BadBlob, locator_store, parse_locator
    from agents.roles.errors import JobRejected, RoleError
    from agents.roles.jobs import fetch_spec
    from agents.roles.runtime import RoundChain, decomposed_runtime

    what = f"decomposed job {args.job_id}"

    async def read() -> tuple[Any, bytes, str]:
        w3, reader = await open_reader(args)
        try:
            rm, job = await _round_job(w3, args, what)
            if job.status != RoundJobStatus.COMPLETED:
                status = RoundJobStatus(job.status).name.lower()
                raise UserError(f"{what} is {status}: it has no final model")
            rounds = int(job.params.rounds)
            root = bytes(await rm.functions.globalRoot(args.job_id, rounds).call())
            logs = await rm.events.AggregateCommitted().get_logs(
                from_block=reader.from_block, argument_filters={"jobId": args.job_id}
            )
            final = [ev["args"]["blobLocator"] for ev in logs
                     if ev["args"]["round"] == rounds - 1
                     and bytes(ev["args"]["aggregateRoot"]) == root]  # fmt: skip
            if not final:
                raise UserError(f"{what}: no aggregate committed with the final root")
            return job.params, root, str(final[-1])
        finally:
            await w3.provider.disconnect()

    params, root, locator = asyncio.run(read())
    try:
        base, blob_address = parse_locator(locator)
        store = locator_store(base, args.allow_local_locators)
        stores = [open_blob_store(url) for url in args.spec_store] + [store]
        spec = fetch_spec(bytes(params.specHash), stores, what)
        rt = decomposed_runtime(spec, RoundChain.of(params), stores, what, MAX_PARAMS)
        size = 4 * sum(t.numel() for t in rt.initial_round_state().values())
        h = rt.decode_round_state(store.get(blob_address, max_bytes=size))
    except (RoleError, JobRejected) as exc:
        raise UserError(str(exc)) from None
    except (BadBlob, BlobError, ValueError) as exc:
        raise UserError(f"{what}: the final aggregate's blob is not readable: {exc}") from None
    if rt.state_root(h) != root:
        raise UserError(f"{what}: the final aggregate's blob is not H_R under the chain's root")
    g = rt.aggregation.unit_start(h)
    return Fetched(module_state_dict(rt.job.bundle, g), rt.state_root(g), rt.metrics(g), None,
                   rt.job.bundle.meta)  # fmt: skip


def write_weights(tensors: dict, out: str, meta: dict | None = None) -> None:
    """Write a `state_dict` (name -> tensor) as a safetensors file: what `job weights` and
    `job fetch` hand back, loadable with `safetensors.torch.load_file` in plain PyTorch. A
    Hugging Face model's (its config in the bundle's meta) goes to a folder `from_pretrained`
    loads (config.json, model.safetensors) unless `out` names a .safetensors file."""
    from safetensors.torch import save_file

    from agents.model import hf

    config = (meta or {}).get(hf.CONFIG_META)
    if config is not None and not out.endswith(".safetensors"):
        try:
            hf.write_pretrained(out, tensors, config)
        except hf.HfError as e:
            raise UserError(str(e)) from None
        return

    try:
        save_file(tensors, out)
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}") from None
