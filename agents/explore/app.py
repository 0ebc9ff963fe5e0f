"""The explorer's pages (Starlette, Jinja2 templates) and its live feed (server-sent events).

Pages: `/` every job (filter `?status=`), `/job/{id}` one JobManager job, `/decomposed/{id}` a
RoundManager job, `/dispute/{game}` a dispute game, `/node/{address}` a node, `/events` the feed.
A page asked with `?fragment=1` is its main part only: the browser's script (static/explore.js)
fetches it again when the feed says something it shows changed, so a page follows the chain
without a reload.

Bad input never shows a stack trace: an unknown id is a 404 page saying so, a chain that does not
answer a 503 page saying so, a blob that does not check a message in the part of the page that
needed it, and anything else a 500 page with one line (the trace goes to the server's log). The
server keeps serving after each.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from sse_starlette.sse import AppStatus, EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from web3 import Web3

from agents.core.bounded import BoundedCache
from agents.core.chain import REPO_ROOT
from agents.core.enums import Role
from agents.explore import dispute as disputes
from agents.explore import job as jobs
from agents.explore.config import ExploreConfig
from agents.explore.index import STATUSES, DecomposedRow, Index, message_json
from agents.explore.provenance import node_module
from agents.explore.published import Published, Unpublished
from agents.explore.reads import ChainDown, ChainReads, NotFound
from agents.roles.errors import RoleError
from agents.roles.job_reads import JobReader
from agents.roles.job_view import duration, time_left, unit_window
from agents.training.spec import ModelSpec

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
#: Chart.js as npm ships it (package.json): served from the checkout, fetched from nowhere.
CHART_JS = REPO_ROOT / "node_modules" / "chart.js" / "dist" / "chart.umd.min.js"
#: Job readers kept (each keeps the dispute events it scanned: a page read again scans only
#: the blocks added since).
READERS = 64
TOKEN = 10**18


class PageError(Exception):
    """A page that cannot be shown: its status code and one line saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Explorer:
    """What the pages read: the config, the chain reads, the blob reads and the live index."""

    cfg: ExploreConfig
    reads: ChainReads
    published: Published
    index: Index

    def __post_init__(self) -> None:
        self.readers: BoundedCache[int, JobReader] = BoundedCache(READERS)

    def reader(self, job_id: int) -> JobReader:
        got = self.readers.get(job_id)
        if got is None:
            got = JobReader(self.reads.w3, self.reads.manager, job_id, self.reads.from_block)
            self.readers.put(job_id, got)
        return got

    async def node_module(self, job_id: int, node: int) -> str:
        """The module of the job's step-graph node `node` (provenance.py), or why unknown."""
        try:
            job = await self.reads.job(job_id)
            locators = sorted(self.index.locators.get(job_id, ()))
            what = f"job {job_id}"
            spec = await asyncio.to_thread(self.published.spec, bytes(job.specHash), locators, what)
            if not isinstance(spec, ModelSpec):
                return "the version-1 MLP's step graph"
            bundle = await asyncio.to_thread(self.published.bundle, spec, locators, what)
        except (Unpublished, NotFound) as exc:
            return f"unknown: {exc}"
        return node_module(bundle, node)


# --- templates -------------------------------------------------------------------------------


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["tokens"] = lambda v: f"{int(v) / TOKEN:,.4g}"
    env.filters["short"] = lambda a: "-" if not a or int(a, 16) == 0 else f"{a[:8]}…{a[-4:]}"
    env.filters["hex"] = lambda b: "0x" + bytes(b).hex()
    env.filters["duration"] = duration
    env.filters["when"] = lambda t: datetime.fromtimestamp(int(t), UTC).strftime(
        "%Y-%m-%d %H:%M:%S"
    )
    env.globals["role_name"] = lambda r: Role(int(r)).name.lower()
    return env


ENV = _env()


def render(request: Request, name: str, ctx: dict[str, Any], status: int = 200) -> HTMLResponse:
    """The page, or its main part alone when asked with ?fragment=1."""
    explorer: Explorer = request.app.state.explorer
    idx = explorer.index
    ctx = {
        "request": request,
        "head": idx.head,
        "chain_error": idx.error,
        "synced": idx.synced,
        "statuses": STATUSES,
        **ctx,
    }
    template = ENV.get_template(name)
    if request.query_params.get("fragment"):
        # what base.html's <main> holds: the chain's status, then the page's main block
        head = ENV.get_template("_status.html").render(ctx)
        body = head + "".join(template.blocks["main"](template.new_context(ctx)))
    else:
        body = template.render(ctx)
    return HTMLResponse(body, status_code=status)


def guarded(name: str):
    """A page handler whose failures are pages: NotFound 404, ChainDown 503, PageError its own,
    anything else 500 with one line (and the trace in the server's log)."""

    def wrap(fn: Callable[[Request], Awaitable[Response]]):
        async def handler(request: Request) -> Response:
            try:
                return await fn(request)
            except (NotFound, RoleError) as exc:
                return _error(request, 404, str(exc))
            except ChainDown as exc:
                return _error(request, 503, str(exc))
            except PageError as exc:
                return _error(request, exc.status, str(exc))
            except Exception as exc:  # the page must never show a trace
                log.exception("%s %s failed", name, request.url.path)
                line = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
                return _error(request, 500, f"this page could not be read: {line}")

        return handler

    return wrap


def _error(request: Request, status: int, message: str) -> Response:
    try:
        return render(request, "error.html", {"status": status, "message": message}, status)
    except Exception:  # the error page itself failed: say it in one line, no trace either
        log.exception("the error page failed")
        return PlainTextResponse(f"{status}: {message}", status)


def _int(request: Request, key: str, what: str) -> int:
    raw = request.path_params[key]
    try:
        value = int(raw, 0) if isinstance(raw, str) else int(raw)
    except ValueError:
        raise PageError(404, f"{what} {raw[:60]!r} is not a number") from None
    if value <= 0:
        raise NotFound(f"no {what} {value}: ids are positive integers")
    return value


# --- pages -----------------------------------------------------------------------------------


@guarded("jobs")
async def jobs_page(request: Request) -> Response:
    explorer: Explorer = request.app.state.explorer
    status = request.query_params.get("status") or None
    if status is not None and status not in STATUSES:
        raise PageError(400, f"status {status[:40]!r}: one of {', '.join(STATUSES)}")
    rows = explorer.index.listing(status)
    return render(
        request,
        "jobs.html",
        {
            "rows": rows,
            "status": status,
            "index": explorer.index,
            "is_decomposed": lambda r: isinstance(r, DecomposedRow),
        },
    )


@guarded("job")
async def job_page(request: Request) -> Response:
    explorer: Explorer = request.app.state.explorer
    job_id = _int(request, "job_id", "job")
    await explorer.reads.job(job_id)  # NotFound first, with the chain's words
    page = await jobs.read_job(explorer.reads, explorer.reader(job_id))
    curves, curve_errors = await _curves(explorer, page)
    row = explorer.index.rows.get(job_id)
    f = page.facts
    units = [
        {
            "u": u,
            "index": i,
            "holder": jobs.holder(u),
            "window": unit_window(u),
            "left": time_left(unit_window(u), f.now, f.block),
            "drawn": page.drawn.get(u.unit_id, []),
            "claimants": page.claimants.get(u.unit_id, []),
        }
        for i, u in enumerate(f.units)
    ]
    return render(
        request,
        "job.html",
        {
            "page": page,
            "f": f,
            "units": units,
            "curves": curves,
            "curve_errors": curve_errors,
            "curves_json": json.dumps(curves),
            "row": row,
            "kind": explorer.index.kind_of(f.spec_hash),
            "fetch_command": _fetch_command(explorer.cfg, job_id),
        },
    )


async def _curves(explorer: Explorer, page: jobs.JobPage) -> tuple[list[dict], list[str]]:
    """One loss curve per commitment (its manifest's losses at steps 0, k, …, T), and why a
    commitment has none (its manifest missing or not checking against the chain)."""
    curves, errors = [], []
    k = page.facts.checkpoint_every
    for i, c in enumerate(page.commitments):
        label = f"attempt {c.attempt + 1} · {c.solver[:8]}…{c.solver[-4:]}"
        try:
            losses = await asyncio.to_thread(
                explorer.published.losses, c.locator, c.checkpoints, c.checkpoint_root
            )
        except Unpublished as exc:
            errors.append(f"{label}: {exc}")
            continue
        curves.append(
            {
                "label": label,
                "index": i,
                "points": [{"x": j * k, "y": v} for j, v in enumerate(losses)],
            }
        )
    return curves, errors


def _fetch_command(cfg: ExploreConfig, job_id: int) -> str:
    parts = ["python -m agents job fetch", str(job_id), "--deployment", str(cfg.deployment)]
    if cfg.rpc_url:
        parts += ["--rpc-url", cfg.rpc_url]
    if cfg.allow_local_locators:
        parts.append("--allow-local-locators")
    return " ".join(parts + ["--out", "model.safetensors"])


@guarded("metric")
async def metric_fragment(request: Request) -> Response:
    """A completed job's held-out metric, computed from its final checkpoint (lazy: the job
    page asks for it once shown)."""
    explorer: Explorer = request.app.state.explorer
    job_id = _int(request, "job_id", "job")
    page = await jobs.read_job(explorer.reads, explorer.reader(job_id))
    final = page.final
    metric, error = None, None
    if final is None:
        error = "the job has no final model yet"
    else:
        job = await explorer.reads.job(job_id)
        try:
            metric = await asyncio.to_thread(
                explorer.published.metric,
                job,
                final.locator,
                final.checkpoint_root,
                final.final_root,
                f"job {job_id}",
            )
        except Unpublished as exc:
            error = str(exc)
    template = ENV.get_template("_metric.html")
    return HTMLResponse(template.render({"metric": metric, "error": error}))


@guarded("decomposed")
async def decomposed_page(request: Request) -> Response:
    explorer: Explorer = request.app.state.explorer
    job_id = _int(request, "job_id", "decomposed job")
    rm = explorer.reads.contract("RoundManager")
    if rm is None:
        raise NotFound("this deployment has no RoundManager (no decomposed jobs)")
    j = await explorer.reads.call(rm.functions.getJob(job_id))
    if int(j.status) == 0:
        raise NotFound(f"no decomposed job {job_id} on RoundManager {rm.address}")
    row = explorer.index.decomposed.get(job_id)
    units = explorer.index.unit_jobs.get(job_id, {})
    grid = [
        [units.get((r, s)) for s in range(int(j.params.shards))]
        for r in range(int(j.params.rounds))
    ]
    return render(
        request,
        "decomposed.html",
        {
            "j": j,
            "row": row,
            "grid": grid,
            "rows": explorer.index.rows,
            "job_id": job_id,
            "progress": explorer.index.decomposed_progress(job_id),
            "kind": explorer.index.kind_of(bytes(j.params.specHash)),
        },
    )


@guarded("dispute")
async def dispute_page(request: Request) -> Response:
    explorer: Explorer = request.app.state.explorer
    game_id = _int(request, "game_id", "dispute game")
    v = await disputes.read_dispute(explorer.reads, game_id, explorer.node_module)
    return render(request, "dispute.html", {"v": v, "picture": _picture(v)})


def _picture(v: disputes.DisputeView) -> dict[str, Any]:
    """The bisection as an SVG: one bar per level, the narrowed-to part marked, and a funnel
    from it to the next level's whole bar."""
    left, width, row, gap = 170, 540, 34, 30
    bars = []
    for i, level in enumerate(v.levels):
        y = 10 + i * (row + gap)
        mark = None
        if level.picked is not None and level.size > 0:
            w = max(4.0, width / level.size)
            x = left + min(width - w, level.picked * width / level.size)
            mark = {"x": round(x, 2), "w": round(w, 2)}
        bars.append({"level": level, "y": y, "mark": mark})
    funnels = []
    for a, b in zip(bars, bars[1:], strict=False):
        if a["mark"] is None:
            continue
        m = a["mark"]
        funnels.append(
            {
                "points": f"{m['x']},{a['y'] + row} {m['x'] + m['w']},{a['y'] + row} "
                f"{left + width},{b['y']} {left},{b['y']}"
            }
        )
    return {
        "bars": bars,
        "funnels": funnels,
        "left": left,
        "width": width,
        "row": row,
        "height": 20 + len(bars) * (row + gap),
    }


@guarded("node")
async def node_page(request: Request) -> Response:
    explorer: Explorer = request.app.state.explorer
    address = request.path_params["address"]
    node, online = await explorer.reads.node(address)
    address = Web3.to_checksum_address(address)
    reads = explorer.reads
    credited = await reads.events(
        ["JobManager", "RoundManager", "AttestationCourt"], ["Credited"], topic1=[address]
    )
    withdrawn = await reads.events(
        ["JobManager", "RoundManager", "AttestationCourt"], ["Withdrawn"], topic1=[address]
    )
    slashed = await reads.events(["NodeRegistry"], ["NodeSlashed"], topic1=[address])
    assigned = [
        e
        for e in await reads.events(["JobManager"], ["UnitAssigned", "Attested"])
        if address in (e.args.get("solver"), e.args.get("verifier"))
    ]
    work = []
    for e in assigned:
        uid = int(e.args["unitId"])
        what = "assigned" if e.name == "UnitAssigned" else "attested"
        work.append({"job": uid >> 32, "unit": uid, "what": what, "block": e.raw.block_number})
    return render(
        request,
        "node.html",
        {
            "address": address,
            "n": node,
            "online": online,
            "earned": sum(int(e.args["amount"]) for e in credited),
            "withdrawn": sum(int(e.args["amount"]) for e in withdrawn),
            "slashes": [(e.raw.block_number, int(e.args["amount"])) for e in slashed],
            "work": work,
            "role": Role(int(node.role)).name.lower(),
        },
    )


async def search(request: Request) -> Response:
    """A job id, a node address or `game N` from the search box."""
    q = (request.query_params.get("q") or "").strip()
    if Web3.is_address(q):
        return RedirectResponse(f"/node/{q}", 303)
    if q.lower().startswith("game "):
        return RedirectResponse(f"/dispute/{q[5:].strip()}", 303)
    return RedirectResponse(f"/job/{q.removeprefix('#') or '0'}", 303)


async def events(request: Request) -> Response:
    """The live feed: one message per thing that changed (`{"kind": …, "id": …}`)."""
    explorer: Explorer = request.app.state.explorer

    async def stream():
        async with explorer.index.hub.subscribe() as q:
            yield {"event": "hello", "data": message_json({"kind": "hello", "id": 0})}
            # Look up once a second whether the server is stopping: a feed still open when the
            # graceful shutdown times out is cancelled mid-await, which uvicorn logs as an
            # error with a traceback.
            while not AppStatus.should_exit:
                try:
                    msg = await asyncio.wait_for(q.get(), timeout=1.0)
                except TimeoutError:
                    continue
                yield {"data": message_json(msg)}

    return EventSourceResponse(stream(), ping=10)


async def chart_js(request: Request) -> Response:
    if not CHART_JS.exists():
        return Response("Chart.js is missing: run `make setup` (npm ci)", 404)
    return FileResponse(CHART_JS, media_type="text/javascript")


async def not_found(request: Request, exc: HTTPException) -> Response:
    return _error(
        request,
        exc.status_code,
        f"no page at {request.url.path[:120]}" if exc.status_code == 404 else str(exc.detail),
    )


def build_app(explorer: Explorer, lifespan=None) -> Starlette:
    app = Starlette(
        routes=[
            Route("/", jobs_page),
            Route("/job/{job_id}", job_page),
            Route("/job/{job_id}/metric", metric_fragment),
            Route("/decomposed/{job_id}", decomposed_page),
            Route("/dispute/{game_id}", dispute_page),
            Route("/node/{address}", node_page),
            Route("/search", search),
            Route("/events", events),
            Route("/vendor/chart.js", chart_js),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        exception_handlers={HTTPException: not_found},
        lifespan=lifespan,
    )
    app.state.explorer = explorer
    return app
