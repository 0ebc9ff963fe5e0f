"""`python -m agents job status|fetch ID`: any job on chain, read by anyone (no key).

`job status` reads the job once: its phase, escrow, each unit's phase and the chain time left
in the window it waits on, the disputes and their winners (agents/roles/job_view.py renders
them). `job fetch` downloads a completed job's final checkpoint from the blob store its
commitment names, checks it against the chain (manifest, state, committed final root) and
writes the model's weights as a safetensors `state_dict`, with the model's test accuracy; a
checkpoint that does not check is one error line, exit 2, and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agents.cli_errors import UserError

DEFAULT_DEPLOYMENT = "build/deployment.json"


def register_chain(jsub: argparse._SubParsersAction) -> None:
    s = jsub.add_parser("status", help="read a job's state from chain (units, disputes, windows)")
    _chain_args(s)
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
    f.add_argument("--json", action="store_true", help="print one JSON object")
    f.set_defaults(func=run_fetch)


def _chain_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=int, metavar="ID", help="the job id (JobPosted's jobId)")
    p.add_argument(
        "--deployment",
        default=DEFAULT_DEPLOYMENT,
        help="deployment file written by `deploy` (default: %(default)s)",
    )
    p.add_argument("--rpc-url", help="the chain's JSON-RPC URL (default: the deployment's)")


def open_reader(args: argparse.Namespace):
    """(Web3, JobReader) of the job in args, from the deployment file; UserError otherwise."""
    from web3 import Web3

    from agents.core.chain import ChainUnavailable, connect
    from agents.core.deploy import load_artifact
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
        w3 = connect(url)
    except (ChainUnavailable, OSError) as exc:
        raise UserError(f"--rpc-url {url}: no chain there ({exc})") from None
    if not w3.eth.get_code(manager):
        raise UserError(f"no JobManager at {manager} on {url} (another chain's deployment?)")
    contract = w3.eth.contract(address=manager, abi=load_artifact("JobManager")["abi"])
    return w3, JobReader(w3, contract, args.job_id, int(record.get("block", 0)))


def run_status(args: argparse.Namespace) -> int:
    from agents.roles.errors import RoleError
    from agents.roles.job_view import facts_json, render_rich, render_text

    _, reader = open_reader(args)
    try:
        facts = reader.read()
    except RoleError as exc:
        raise UserError(str(exc)) from None
    if args.json:
        print(json.dumps(facts_json(facts)))
    elif sys.stdout.isatty():
        from rich.console import Console

        Console().print(render_rich(facts))
    else:
        print(render_text(facts))
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    from agents.core import datasets
    from agents.core.blobs import open_blob_store
    from agents.core.enums import JobStatus
    from agents.core.keys import DEV_CHAIN_IDS
    from agents.roles.artifacts import BadBlob, locator_store, parse_locator, read_final_state
    from agents.roles.errors import RoleError
    from agents.roles.jobs import JobRejected, fetch_spec
    from agents.training.engine import Engine
    from agents.training.spec import SPEC_VERSION
    from agents.training.state import state_root, torch_state_dict

    w3, reader = open_reader(args)
    if args.allow_local_locators and w3.eth.chain_id not in DEV_CHAIN_IDS:
        raise UserError(f"--allow-local-locators: chain id {w3.eth.chain_id} is not a dev chain")
    what = f"job {args.job_id}"
    try:
        job = reader.job()
        status = JobStatus(job["status"])
        if status != JobStatus.COMPLETED:
            raise UserError(f"{what} is {status.name.lower()}: it has no final model")
        units = reader.unit_ids(int(job["unitCount"]))
        if len(units) != 1:
            raise UserError(f"{what} has {len(units)} units: fetch reads a one-unit job's model")
        unit_id = units[0]
        c = reader.commitment(unit_id)
        stores = [open_blob_store(url) for url in args.spec_store]
        try:
            stores.append(locator_store(parse_locator(c.locator)[0], args.allow_local_locators))
        except BadBlob as exc:
            raise UserError(f"{what}: {exc}") from None
        spec = fetch_spec(bytes(job["specHash"]), stores, what)
        if spec.version != SPEC_VERSION:
            raise UserError(f"{what} runs a version-{spec.version} spec: fetch reads version 1")
        st, losses = read_final_state(
            spec, c.locator, c.published_root, c.final_root, args.allow_local_locators
        )
    except (RoleError, JobRejected) as exc:
        raise UserError(str(exc)) from None
    except BadBlob as exc:
        raise UserError(
            f"{what}: the final checkpoint does not check against the chain: {exc}"
        ) from None
    data = datasets.load_dataset(spec.dataset_name)
    if data.root() != bytes(job["datasetRoot"]):
        raise UserError(f"{what}: dataset {spec.dataset_name} differs from the chain's root")
    test = datasets.test_split_for(spec.dataset_name)
    accuracy = Engine(spec, data).accuracy(st, test) if test is not None else None
    weights = torch_state_dict(st, spec.widths)
    write_weights(weights, args.out)
    out = {
        "job_id": args.job_id,
        "out": args.out,
        "tensors": len(weights),
        "state_root": "0x" + state_root(st).hex(),
        "test_accuracy": accuracy,
        "final_loss": losses[-1] if losses else None,
    }
    if args.json:
        print(json.dumps(out))
    else:
        acc = f"{accuracy:.4f}" if accuracy is not None else "n/a (no test split)"
        print(
            f"{what}: wrote {args.out} ({len(weights)} tensors), state root "
            f"{out['state_root']} matches the chain; test accuracy {acc}"
        )
    return 0


def write_weights(tensors: dict, out: str) -> None:
    """Write a `state_dict` (name -> tensor) as a safetensors file: what `job weights` and
    `job fetch` hand back, loadable with `safetensors.torch.load_file` in plain PyTorch."""
    from safetensors.torch import save_file

    try:
        save_file(tensors, out)
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}") from None
