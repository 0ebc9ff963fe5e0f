"""`python -m agents job build|weights`: bring a PyTorch model, get a version-3 job spec; get the
trained weights back as a `state_dict` file.

`job build` seeds torch, calls the factory in the model file, lowers one whole training step
(agents/model/lower.py) and writes the spec plus two content-addressed blobs — the model bundle
(addressed by keccak-256) and the initial state (addressed by its state root) — to the blob
store (`--blob-url`; default: the folder `<spec>.blobs` beside the spec). Every check runs
before anything is written. Another blob store, and the stores a packed dataset's chunks were
read from, are recorded beside the spec (agents/core/spec_files.py), so `train`, `job weights`
and the submitter find them unasked.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import importlib.util
import json
import sys
import time
from pathlib import Path

from agents.cli.errors import UserError
from agents.cli.options import add_options, build
from agents.core import spec_files
from agents.data.chunks import FetchConfig

DEFAULT_MAX_PARAMS = 1 << 24


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "job", help="build a job spec from a PyTorch model; read a job on chain; get its weights"
    )
    jsub = p.add_subparsers(dest="job_command", required=True, metavar="JOB_COMMAND")
    b = jsub.add_parser("build", help="lower a model's training step into a job spec + blobs")
    b.add_argument("--model", help="FILE.py:FACTORY (FACTORY() returns the module; a Hugging "
                   "Face PreTrainedModel too)")  # fmt: skip
    b.add_argument("--hf-config", metavar="CONFIG.json",
                   help="instead of --model: a Hugging Face causal LM built from this local "
                   "config (the transformers extra, pip install -e '.[hf]'; nothing is "
                   "downloaded)")  # fmt: skip
    b.add_argument("--dataset", required=True,
                   help="a built-in dataset name, or a packed dataset's manifest.json")  # fmt: skip
    # a packed dataset's stores (manifest:0x…, or a manifest file's chunks: the file's own
    # blobs/ folder is tried first)
    add_options(b, FetchConfig)
    b.add_argument("--optimizer", choices=("sgd", "nesterov", "adam", "adamw"), required=True,
                   help="sgd: momentum SGD; nesterov: SGD with Nesterov momentum; adam: L2 "
                   "weight decay; adamw: decoupled weight decay")  # fmt: skip
    b.add_argument("--lr", type=float, required=True)
    b.add_argument("--momentum", type=float, help="sgd, nesterov: momentum (default 0)")
    b.add_argument("--betas", help="adam, adamw: B1,B2 (default 0.9,0.999)")
    b.add_argument("--eps", type=float, help="adam, adamw: epsilon (default 1e-8)")
    b.add_argument("--weight-decay", type=float, help="adam, adamw: weight decay (default 0)")
    b.add_argument("--clip-norm", type=float, help="clip the global gradient norm to this")
    add_recipe_flags(b)
    b.add_argument("--batch", type=int, required=True)
    b.add_argument("--steps", type=int, required=True)
    b.add_argument("--checkpoint-every", type=int, required=True)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--rounds", type=int, help="decompose: R rounds of steps/R local steps")
    b.add_argument("--shards", type=int, help="decompose: S shards a round, aggregated after it")
    b.add_argument(
        "--outer",
        choices=("average", "nesterov"),
        help="decompose: the outer optimizer (default average: version 2's rule)",
    )
    b.add_argument("--outer-lr", type=float, help="nesterov: outer learning rate (default 0.7)")
    b.add_argument("--outer-momentum", type=float,
                   help="nesterov: outer momentum (default 0.9)")  # fmt: skip
    b.add_argument(
        "--stages",
        type=int,
        default=1,
        help="pipeline: split the step at module boundaries into P stages",
    )
    b.add_argument("--micro-batches", type=int,
                   help="pipeline: M micro-batches a step (gradients summed in order; the same "
                   "as --accumulate M)")  # fmt: skip
    b.add_argument("--stage-split", metavar="MOD,MOD",
                   help="pipeline: the first module of each later stage, e.g. blocks.2 or "
                   "transformer.h.2 (default: balanced by parameter bytes)")  # fmt: skip
    b.add_argument("--solver-memory-mib", type=int, metavar="MIB",
                   help="the most memory a solver declares (NodeRegistry memoryMiB): refuse a "
                   "job none can hold, saying when only a pipeline can")  # fmt: skip
    b.add_argument("--max-params", type=int, default=DEFAULT_MAX_PARAMS)
    b.add_argument("--out", required=True, help="the spec file to write (job.json)")
    b.add_argument("--blob-url", help="blob store for the bundle and state (default <out>.blobs; "
                   "another is recorded in <out>.sources.json for train, job weights and the "
                   "submitter)")  # fmt: skip
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.set_defaults(func=run_build)
    w = jsub.add_parser("weights", help="write a trained state as the module's state_dict")
    w.add_argument("--spec", required=True)
    w.add_argument("--state", required=True, help="a state file (train --out-state) or a root")
    w.add_argument("--out", required=True, help="model.safetensors (a Hugging Face model: a "
                   "folder for from_pretrained, unless it ends in .safetensors)")  # fmt: skip
    w.add_argument("--blob-url", help="blob store (default: recorded beside the spec, else "
                   "<spec>.blobs)")  # fmt: skip
    w.set_defaults(func=run_weights)
    from agents.cli.job_chain import register_chain

    register_chain(jsub)


def add_recipe_flags(b: argparse.ArgumentParser) -> None:
    """The training recipe beyond the optimizer (agents/model/lower.py Recipe), and the model's
    context length."""
    b.add_argument("--no-decay-bias-norm", action="store_true",
                   help="no weight decay on biases and norm weights (parameters of fewer than 2 "
                   "dimensions), as nanoGPT and LLaMA do")  # fmt: skip
    b.add_argument("--warmup", type=int, default=0, help="linear warmup over the first N steps")
    b.add_argument("--decay", choices=("constant", "cosine", "linear"), default="constant",
                   help="the lr after the warmup, down to --min-lr at the last step")  # fmt: skip
    b.add_argument("--min-lr", type=float, default=0.0, help="the decay's final lr (default 0)")
    b.add_argument("--lr-scheduler", metavar="FILE.py:FACTORY",
                   help="FACTORY(optimizer) returns a torch.optim.lr_scheduler: its lr at every "
                   "step is sampled at build time")  # fmt: skip
    b.add_argument("--accumulate", type=int, default=1,
                   help="sum the gradients of N micro-batches of batch/N per step")  # fmt: skip
    b.add_argument("--ignore-index", type=int, default=-100,
                   help="cross-entropy: targets of this value do not count")  # fmt: skip
    b.add_argument("--label-smoothing", type=float, default=0.0, help="cross-entropy smoothing")
    b.add_argument("--context", type=int,
                   help="a language model's context length (default: its block_size)")  # fmt: skip


def _recipe(args, steps: int, lr: float):
    """The Recipe of `job build`'s flags: the lr schedule as one multiplier per step."""
    from agents.model.lower import Recipe
    from agents.model.schedule import ScheduleError, scheduler_multipliers, warmup_decay

    if getattr(args, "micro_batches", None) is not None:  # --stages: micro-batches accumulate
        if args.accumulate not in (1, args.micro_batches):
            raise UserError(f"--micro-batches {args.micro_batches} and --accumulate "
                            f"{args.accumulate} disagree: give one")  # fmt: skip
        if args.micro_batches < 1 or args.batch % args.micro_batches:
            raise UserError(f"--micro-batches must divide --batch ({args.batch}), got "
                            f"{args.micro_batches}")  # fmt: skip
        args = argparse.Namespace(**{**vars(args), "accumulate": args.micro_batches})
    if args.accumulate < 1 or args.batch % args.accumulate:
        raise UserError(f"--accumulate must divide --batch ({args.batch}), got {args.accumulate}")
    if not 0.0 <= args.label_smoothing <= 1.0:
        raise UserError(f"--label-smoothing must be in [0, 1], got {args.label_smoothing}")
    shaped = args.warmup or args.decay != "constant" or args.min_lr
    if args.lr_scheduler and shaped:
        raise UserError("--lr-scheduler replaces --warmup, --decay and --min-lr")
    try:
        if args.lr_scheduler:
            schedule = scheduler_multipliers(load_factory(args.lr_scheduler, "--lr-scheduler"),
                                             lr, steps)  # fmt: skip
        elif shaped:
            schedule = warmup_decay(steps, lr, args.warmup, args.decay, args.min_lr)
        else:
            schedule = None
    except ScheduleError as e:
        raise UserError(str(e)) from None
    return Recipe(args.accumulate, schedule, args.ignore_index, args.label_smoothing)


def _stages(args, decomposed: bool) -> tuple[int, list[str] | None]:
    """--stages P, --stage-split: P and the named split (the module names are checked against
    the model when it is lowered)."""
    if args.stages < 1:
        raise UserError(f"--stages must be >= 1, got {args.stages}")
    if args.stages == 1:
        for flag, v in (("--micro-batches", args.micro_batches),
                        ("--stage-split", args.stage_split)):  # fmt: skip
            if v is not None:
                raise UserError(f"{flag} needs --stages P with P >= 2")
        return 1, None
    if decomposed:
        raise UserError("--stages with --rounds/--shards is not yet supported")
    split = None if args.stage_split is None else [s.strip() for s in args.stage_split.split(",")]
    return args.stages, split


def _outer(args, decomposed: bool):
    """The outer optimizer of --outer / --outer-lr / --outer-momentum (decomposed jobs only)."""
    from agents.model.aggregate import Outer

    given = {"--outer": args.outer, "--outer-lr": args.outer_lr,
             "--outer-momentum": args.outer_momentum}  # fmt: skip
    if not decomposed:
        for flag, v in given.items():
            if v is not None:
                raise UserError(f"{flag} applies to a decomposed job (--rounds, --shards)")
        return None
    kind = args.outer or "average"
    if kind == "average":
        for flag in ("--outer-lr", "--outer-momentum"):
            if given[flag] is not None:
                raise UserError(f"{flag} applies to --outer nesterov")
        return Outer()
    lr = 0.7 if args.outer_lr is None else args.outer_lr
    mu = 0.9 if args.outer_momentum is None else args.outer_momentum
    return Outer.nesterov(lr, mu)


def _optimizer(args):
    from agents.model.lower import Optimizer

    sgd_only = {"--momentum": args.momentum}
    adam_only = {"--betas": args.betas, "--eps": args.eps, "--weight-decay": args.weight_decay}
    wrong = sgd_only if args.optimizer in ("adam", "adamw") else adam_only
    for flag, v in wrong.items():
        if v is not None:
            raise UserError(f"{flag} does not apply to --optimizer {args.optimizer}")
    if args.optimizer in ("sgd", "nesterov"):
        return Optimizer(args.optimizer, args.lr, momentum=args.momentum or 0.0,
                         clip_norm=args.clip_norm,
                         no_decay_1d=args.no_decay_bias_norm)  # fmt: skip
    betas = (0.9, 0.999)
    if args.betas is not None:
        try:
            b1, b2 = (float(v) for v in args.betas.split(","))
        except ValueError:
            raise UserError(f"--betas must be two numbers B1,B2, got {args.betas!r}") from None
        betas = (b1, b2)
    return Optimizer(args.optimizer, args.lr, betas=betas,
                     eps=1e-8 if args.eps is None else args.eps,
                     weight_decay=args.weight_decay or 0.0, clip_norm=args.clip_norm,
                     no_decay_1d=args.no_decay_bias_norm)  # fmt: skip


@contextlib.contextmanager
def _importable_beside(path: str):
    """The file's folder first on sys.path, as Python puts a script's folder (so a model file
    may import the modules beside it)."""
    folder = str(Path(path).resolve().parent)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)


def load_factory(ref: str, flag: str = "--model"):
    """FILE.py:FACTORY -> the callable (run with the file's folder on sys.path, like its
    import); UserError for anything the user got wrong."""
    path, sep, name = ref.rpartition(":")
    if not sep or not path or not name.isidentifier():
        raise UserError(f"{flag} must be FILE.py:FACTORY, got {ref!r}")
    if not Path(path).is_file():
        raise UserError(f"{flag}: no file {path}")
    spec = importlib.util.spec_from_file_location(f"vtp_user_model_{abs(hash(path))}", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        with _importable_beside(path):
            spec.loader.exec_module(mod)
    except Exception as e:  # the user's file: any error is theirs, reported in one line
        raise UserError(f"{flag}: {path} failed to import: {type(e).__name__}: {e}"[:400]) from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise UserError(f"{flag}: {path} has no callable {name}")

    @functools.wraps(fn)
    def call(*a, **kw):
        with _importable_beside(path):
            return fn(*a, **kw)

    return call


def run_build(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from agents.core.blobs import open_blob_store
    from agents.data import datasets, tokens
    from agents.model import hf
    from agents.model import job as mj
    from agents.model.aggregate import graph_hash
    from agents.model.lower import LoweringError, build_bundle
    from agents.model.stage_placement import memory_refusal
    from agents.training import float32 as F
    from agents.training import spec as sp
    from agents.training.keccak import keccak256

    t0 = time.perf_counter()
    for flag, v in (("--batch", args.batch), ("--steps", args.steps),
                    ("--checkpoint-every", args.checkpoint_every),
                    ("--max-params", args.max_params)):  # fmt: skip
        if v < 1:
            raise UserError(f"{flag} must be >= 1, got {v}")
    if args.seed < 0:
        raise UserError(f"--seed must be >= 0, got {args.seed}")
    decomposed = args.rounds is not None or args.shards is not None
    # `is None`, not `or`: --rounds 0 is a mistake to refuse, not one round
    rounds = 1 if args.rounds is None else args.rounds
    shards = 1 if args.shards is None else args.shards
    if decomposed:
        for flag, v in (("--rounds", rounds), ("--shards", shards)):
            if v < 1:
                raise UserError(f"{flag} must be >= 1, got {v}")
        if args.steps % rounds:
            raise UserError(f"--rounds must divide --steps ({args.steps}), got {rounds}")
    outer = _outer(args, decomposed)
    opt = _optimizer(args)
    hyper_bits = tuple((k, F.bits(np.float32(v))) for k, v in opt.hyper().items())
    dataset_name, ds, manifest, chunk_stores = _dataset(args.dataset, build(FetchConfig, args))
    if isinstance(ds, tokens.TokenDataset):
        task, classes = "lm", ds.classes
    else:
        task, classes = "classify", ds.classes
    if (args.model is None) == (args.hf_config is None):
        raise UserError("give --model FILE.py:FACTORY or --hf-config CONFIG.json (one of them)")
    torch.manual_seed(args.seed % (1 << 63))
    try:
        if args.hf_config:
            module = hf.model_from_config(args.hf_config)
        else:
            factory = load_factory(args.model)
            module = factory()
    except (UserError, hf.HfError) as e:
        raise UserError(str(e)) from None
    except Exception as e:  # the user's code
        raise UserError(f"--model: {args.model} raised {type(e).__name__}: {e}"[:400]) from None
    if not isinstance(module, torch.nn.Module):
        raise UserError(f"--model: {args.model} returned {type(module).__name__}, not a Module")
    hf.prepare(module)
    n = sum(p.numel() for p in module.parameters())
    if n > args.max_params:
        raise UserError(f"the model has {n} parameters, over --max-params {args.max_params}")
    context = _context(module, task, args.context)
    if task == "lm":
        item = (context,)
    else:
        item = manifest.item_shape if manifest else datasets.item_shape(dataset_name)
    # the optimizer the graph is lowered with holds the binary32 values the spec will carry
    opt = type(opt)(**{**opt.__dict__, **{k: float(F.f32(b)) for k, b in hyper_bits
                                           if k in ("lr", "momentum", "eps", "weight_decay",
                                                    "clip_norm")}})  # fmt: skip
    recipe = _recipe(args, args.steps, float(F.f32(dict(hyper_bits)["lr"])))
    stages, split = _stages(args, decomposed)
    if args.solver_memory_mib is not None and args.solver_memory_mib < 1:
        raise UserError(f"--solver-memory-mib must be >= 1, got {args.solver_memory_mib}")
    try:
        lowered = build_bundle(module, opt, args.batch, task, item, classes,
                               meta=_meta(args, module), recipe=recipe, stages=stages,
                               stage_split=split)  # fmt: skip
    except LoweringError as e:
        raise UserError(str(e)) from None
    st = dict(lowered.state)
    bundle = lowered.bundle
    if args.solver_memory_mib is not None:  # before anything is written
        names = bundle.stages["state"] if bundle.stages else [list(st)]
        why = memory_refusal([sum(st[n].nbytes for n in ns) for ns in names],
                             args.solver_memory_mib)  # fmt: skip
        if why:
            raise UserError(why)
    graph_bytes = bundle.to_bytes()  # encoded once: its hash, its blob, its size
    spec = sp.ModelSpec(
        graph="0x" + keccak256(graph_bytes).hex(),
        state="0x" + mj.state_root(st).hex(),
        dataset_name=dataset_name,
        dataset_root=mj.dataset_root(ds),
        optimizer=opt.kind,
        hyper_bits=hyper_bits,
        batch=args.batch,
        seed=args.seed,
        steps=args.steps,
        checkpoint_every=args.checkpoint_every,
        rounds=rounds,
        shards=shards,
        local_steps=args.steps // rounds if decomposed else None,
    )
    if decomposed:  # the aggregation graph, lowered beside the step graph, bound by its hash
        spec = dataclasses.replace(spec, outer=outer.kind, outer_bits=outer.bits(),
                                   aggregate="0x" + "00" * 32)  # fmt: skip
        sp.parse_spec(json.loads(spec.canonical_bytes()))  # the ranges first
        positions = mj.positions(bundle, ds)
        if shards > positions:
            raise UserError(
                f"--shards {shards} is more than the dataset's {positions} "
                "examples (every shard needs one)"
            )
        agg = mj.job_aggregation(bundle, spec, positions)
        spec = dataclasses.replace(spec, aggregate=graph_hash(agg.graph))
    sp.parse_spec(json.loads(spec.canonical_bytes()))  # every range check the spec has
    job = mj.ModelJob(spec, bundle, ds)  # the interface, the batch source, the binding
    url = args.blob_url or spec_files.default_blobs(args.out)
    store = open_blob_store(url)
    graph_addr = store.put(graph_bytes)
    # S_0 under the root computed above from its tensors, written tensor by tensor (never
    # joined: at 43M parameters the joined blob alone was 0.5 GB); a reader re-checks the root
    state_addr = store.put_parts(spec.state, mj.state_parts(st))
    assert graph_addr == spec.graph
    if manifest is not None:  # the spec names it by address: the job's store holds it too
        store.put(manifest.canonical_bytes())
    Path(args.out).write_bytes(spec.canonical_bytes() + b"\n")
    # not where a reader would look (another blob store, any chunk store): say where, beside it
    spec_files.write_sources(args.out, url, chunk_stores)
    out = {
        "spec": args.out,
        "spec_hash": "0x" + spec.spec_hash().hex(),
        "graph": graph_addr,
        "state": state_addr,
        "blob_url": url,
        "params": n,
        "nodes": len(bundle.step.nodes),
        "graph_bytes": len(graph_bytes),
    }
    if decomposed:
        out |= {"aggregate": spec.aggregate, "aggregate_nodes": len(job.aggregation.graph.nodes)}
    if bundle.stages:  # the pipeline plan (PROTOCOL §5.4)
        out |= {"stages": len(bundle.stages["state"]),
                "micro_batches": bundle.stages["micro_batches"],
                "stage_modules": ";".join(",".join(m) for m in bundle.stages["modules"]),
                "boundary_tensors": len(bundle.stages["boundaries"])}  # fmt: skip
    out |= {
        "seconds": round(time.perf_counter() - t0, 3),
    }
    if args.json:
        print(json.dumps(out))
    else:
        print("  ".join(f"{k}={v}" for k, v in out.items()))
    return 0


def _meta(args, module) -> dict:
    """The bundle's informational meta: the model file's name and factory, and a Hugging Face
    model's config (for `from_pretrained` folders; nothing of where it was read from)."""
    from agents.model import hf

    if args.hf_config:  # the config is the model: its file's name is not (hf.config_of)
        meta = {"factory": "AutoModelForCausalLM"}
    else:
        meta = {"model": Path(args.model.rpartition(":")[0]).name,
                "factory": args.model.rpartition(":")[2]}  # fmt: skip
    config = hf.config_of(module)
    if config is not None:
        meta[hf.CONFIG_META] = config
    return meta


def _dataset(arg: str, fetch: FetchConfig):
    """(spec dataset name, dataset, manifest or None, the stores its chunks were read from) of
    --dataset: a built-in name, or the path of a packed dataset's manifest (its chunks fetched
    and checked, PROTOCOL §4.4; its folder's blobs/ first, then --data-store)."""
    from agents.data import chunks, datasets

    if not Path(arg).is_file() and not chunks.is_packed_ref(arg):
        return arg, datasets.load_dataset(arg), None, ()
    fetcher = chunks.open_packed(arg, fetch)
    local = Path(arg).parent / "blobs" if Path(arg).is_file() else None
    stores = ((str(local),) if local is not None and local.is_dir() else ()) + fetch.stores
    return fetcher.manifest.name(), fetcher.load(), fetcher.manifest, stores


def _context(module, task: str, given: int | None = None) -> int:
    """A language model's context length: --context, else its `block_size` / `context` /
    `context_length` attribute (a Hugging Face config's `n_positions` /
    `max_position_embeddings`)."""
    if task != "lm":
        if given is not None:
            raise UserError("--context applies to language models (a token dataset)")
        return 0
    if given is not None:
        if given < 1:
            raise UserError(f"--context must be >= 1, got {given}")
        return given
    config = getattr(module, "config", None)
    for owner, attr in ((module, "block_size"), (module, "context"), (module, "context_length"),
                        (config, "n_positions"), (config, "max_position_embeddings")):  # fmt: skip
        v = getattr(owner, attr, None)
        if isinstance(v, int) and v > 0:
            return v
    raise UserError("a language model needs its context length: give --context N (or a "
                    "`block_size` attribute)")  # fmt: skip


def load_job(spec_path: str, blob_url: str | None, cfg=None, fetch=None):
    """(spec, bundle, initial state, dataset) of a version-3 spec, every hash checked: its blobs
    from `blob_url`, else the store recorded beside the spec, else <spec>.blobs; a packed dataset
    fetched from `fetch`'s stores, then the recorded ones, then the job's blob store."""
    from agents.core.blobs import BlobError, open_blob_store
    from agents.data import datasets
    from agents.data.chunks import FetchConfig
    from agents.model import job as mj
    from agents.model.bundle import bundle_from_bytes
    from agents.training import spec as sp
    from agents.training.run import RunConfig

    spec = sp.load(spec_path)
    if spec.version != sp.SPEC_VERSION_MODEL:
        raise UserError(f"{spec_path} is a version-{spec.version} spec; this needs version 3")
    url = spec_files.blob_url(spec_path, blob_url)
    store = open_blob_store(url)
    try:
        bundle = bundle_from_bytes(store.get(spec.graph))
        blob = store.get(
            spec.state, address_fn=lambda d: "0x" + mj.blob_state_root(bundle, d).hex()
        )
    except BlobError as e:
        raise UserError(f"cannot read the job's blobs: {e}"[:400]) from None
    st = mj.decode_state(bundle, blob)
    # a packed dataset: the given stores (default none), then the ones recorded beside the spec
    # (where `job build` read its chunks), then the job's blob store
    fetch = (fetch or FetchConfig()).with_stores(*spec_files.data_stores(spec_path), url)
    ds = datasets.load_dataset(spec.dataset_name, fetch)
    root = mj.dataset_root(ds)
    if root != spec.dataset_root:
        raise UserError(f"dataset {spec.dataset_name} has root {root}, spec says "
                        f"{spec.dataset_root}")  # fmt: skip
    job = mj.ModelJob(spec, bundle, ds, cfg or RunConfig())
    return job, st


def read_state(job, state_arg: str, blob_url: str | None, spec_path: str):
    import re

    from agents.core.blobs import BlobError, open_blob_store
    from agents.model import job as mj

    if re.fullmatch(r"0x[0-9a-fA-F]{64}", state_arg):
        store = open_blob_store(spec_files.blob_url(spec_path, blob_url))
        try:
            blob = store.get(state_arg.lower(), address_fn=lambda d: "0x" + mj.state_root(
                mj.decode_state(job.bundle, d)).hex())  # fmt: skip
        except BlobError as e:
            raise UserError(f"cannot read state {state_arg}: {e}"[:400]) from None
    else:
        try:
            blob = Path(state_arg).read_bytes()
        except OSError as e:
            raise UserError(f"cannot read --state {state_arg}: {e.strerror}") from None
    return mj.decode_state(job.bundle, blob)


def run_weights(args: argparse.Namespace) -> int:
    from agents.cli.job_chain import write_weights
    from agents.model.job import module_state_dict, state_root

    job, _ = load_job(args.spec, args.blob_url)
    st = read_state(job, args.state, args.blob_url, args.spec)
    out = module_state_dict(job.bundle, st)
    write_weights(out, args.out, job.bundle.meta)
    root = "0x" + state_root(st).hex()
    print(json.dumps({"out": args.out, "tensors": len(out), "state_root": root}))
    return 0
