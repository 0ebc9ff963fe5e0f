"""Network bench of a pipelined step (issue #43; PROTOCOL §5.4, §6.5): bench/results/pipeline.json.

Six stage solvers, each a process in its own network namespace with its own blob server. Every
pair of namespaces has its own veth link: rate limited by `tc ... tbf` at both ends, latency
added by a user-space delaying proxy (tools/delayproxy.py) in the fetching side's namespace.
Two zones: nodes 0-3 (zone 1.1) and 4-5 (zone 2.1); pairs within a zone get 5 ms round trip
and 1 Gbit/s, pairs across zones 80 ms and 20 Mbit/s.

The 4-layer GPT (d = 128) runs as P = 2 and P = 4 stages of M micro-batches. Per segment the
coordinator tells a stage's process to run it; the process fetches its boundary inputs from the
producers' blob servers, side by side (each blob checked against its address, each tensor
against the root its producer committed), runs the segment and publishes its boundary outputs
in its own blob server. Placements: the network-aware one (agents/model/stage_placement.py,
from the declared zones and the throughput and latency measured between every pair first) and
random draws.

Every placement runs from S_0, their steps interleaved (step t of each, in a shuffled order,
before any step t + 1), so that the shared machine's load falls on all of them alike.
Reported: time per step of each placement (the median of its steps), the ratio of the random
draws' mean to the aware one's (goal >= 2), the bytes on each link per step (payload, and the
veth counters), each stage's state and peak held tensor bytes against the whole model's state,
and that every pipelined run ends in the one-process run's state root, bit for bit. Needs root
(ip netns). The namespaces are deleted at the end, on failure and on SIGINT/SIGTERM.

    sudo .venv/bin/python -m bench.pipeline_bench
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "pipeline.json"
VOCAB, D, HEADS, LAYERS, T = 64, 128, 4, 4, 32
BATCH, M, STEPS = 8, 4, 4
NODES = 6
ZONES = [0x0101] * 4 + [0x0201] * 2
FAST = (5.0, 1000)  # round trip ms, Mbit/s: within a zone
SLOW = (80.0, 20)  # across zones
BLOB_PORT, PROXY_BASE = 8700, 9000
RANDOM_DRAWS = 8
NS_PREFIX = "vtppipe"


def ns(i: int) -> str:
    return f"{NS_PREFIX}{i}"


def link_params(i: int, j: int) -> tuple[float, int]:
    return FAST if ZONES[i] == ZONES[j] else SLOW


def pairs() -> list[tuple[int, int, int]]:
    return [(k, i, j) for k, (i, j) in
            enumerate((i, j) for i in range(NODES) for j in range(i + 1, NODES))]  # fmt: skip


def peer_ip(k: int, i: int, j: int, who: int) -> str:
    """The address of `who` (i or j) on pair k's link."""
    return f"10.77.{k}.{1 if who == i else 2}"


def empty(folder: Path) -> None:
    for child in folder.iterdir():
        shutil.rmtree(child) if child.is_dir() else child.unlink()


# -- tensors as blobs ----------------------------------------------------------------------------


def tensor_bytes(t) -> bytes:
    a = t.contiguous().numpy()
    head = json.dumps({"dtype": str(a.dtype), "shape": list(a.shape)}).encode()
    return head + b"\n" + a.tobytes()


def tensor_from(data: bytes):
    import numpy as np
    import torch

    head, _, body = data.partition(b"\n")
    h = json.loads(head)
    return torch.from_numpy(np.frombuffer(body, dtype=h["dtype"]).reshape(h["shape"]).copy())


# -- the stage process (inside its namespace) ----------------------------------------------------


class Slot:
    """One stage this process holds for one placement."""

    def __init__(self, holder):
        self.holder = holder
        self.segs: dict = {}
        self.mine: set[str] = set()  # the boundary tensors this stage publishes
        self.pending: dict = {}  # S_{t+1} of this stage, as its segments make it
        self.peak: dict = {}

    def held(self) -> dict:
        """Tensor bytes held between segments: own state, boundary tensors received and
        published, and the stage's other values (activations its backward reads)."""
        got = set(self.holder.received)
        vals = self.holder.values
        return {
            "state": sum(t.nbytes for t in self.holder.state.values()),
            "boundary_in": sum(vals[n].nbytes for n in got),
            "boundary_out": sum(t.nbytes for n, t in vals.items() if n in self.mine),
            "activations": sum(t.nbytes for n, t in vals.items() if n not in got | self.mine),
        }


def worker(node: int, work: Path) -> int:
    import torch

    from agents.core.blobs import BlobServer, BlobStore, HttpBackend, LocalDirBackend
    from agents.model.bundle import bundle_from_bytes
    from agents.model.stage_plan import StagePlan
    from agents.model.stages import StageHolder, boundary_root, segment, value_name
    from agents.training.run import RunConfig, run_graph

    torch.set_num_threads(1)
    blobs = work / f"blobs{node}"
    server = BlobServer(LocalDirBackend(blobs), host="0.0.0.0", port=BLOB_PORT).start()
    own = BlobStore(LocalDirBackend(blobs))
    peers = {j: BlobStore(HttpBackend(f"http://127.0.0.1:{PROXY_BASE + j}", timeout_s=120))
             for j in range(NODES) if j != node}  # fmt: skip
    cfg = RunConfig()
    pool = ThreadPoolExecutor(8)
    publics: dict = {}
    slots: dict[str, Slot] = {}  # one a placement this node holds a stage of
    bundles = {}

    def peak_rss_reset() -> None:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS

    def peak_rss_kib() -> int:
        line = next(x for x in Path("/proc/self/status").read_text().splitlines()
                    if x.startswith("VmHWM:"))  # fmt: skip
        return int(line.split()[1])

    print(json.dumps({"ready": node}), flush=True)
    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg["cmd"]
        reply: dict = {}
        if cmd == "probe":  # latency: the best of 3 small fetches; throughput: one big one
            store = peers[msg["peer"]]
            lat = []
            for _ in range(3):
                t0 = time.perf_counter()
                store.get(msg["small"])
                lat.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            n = len(store.get(msg["big"]))
            dt = time.perf_counter() - t0
            rtt = min(lat)
            reply = {"latency_ms": rtt * 1e3, "throughput_mbps": n * 8 / max(dt - rtt, 1e-6) / 1e6}
        elif cmd == "warm":  # the whole step once, untimed: every kernel loaded before timing
            b = bundle_from_bytes(Path(msg["bundle"]).read_bytes())
            st, pub = torch.load(msg["state"]), torch.load(msg["public"])
            ins = [st[v.name] for v in b.state]
            ins += [pub[v.name] for v in b.step.inputs[len(b.state) :]]
            run_graph(b.step, ins, cfg)
            del b, st, pub, ins
        elif cmd == "load":
            path = msg["bundle"]
            if path not in bundles:
                b = bundle_from_bytes(Path(path).read_bytes())
                bundles[path] = (b, StagePlan.from_obj(b.stages))
            b, plan = bundles[path]
            stage = msg["stage"]
            slot = Slot(StageHolder(stage, torch.load(msg["state"])))
            slot.segs = {k: segment(b.step, plan, k) for k, (s, _) in enumerate(plan.schedule)
                         if s == stage}  # fmt: skip
            slot.mine = {value_name(v) for v, p, _ in plan.boundaries if p == stage}
            slot.peak = slot.held()
            slots[msg["key"]] = slot
            if msg.get("first"):
                slots.clear()
                slots[msg["key"]] = slot
                peak_rss_reset()
        elif cmd == "run":
            slot = slots[msg["key"]]
            holder, seg = slot.holder, slot.segs[msg["k"]]
            if msg["public"] not in publics:
                publics.clear()
                publics[msg["public"]] = torch.load(msg["public"])
            public = publics[msg["public"]]
            t0 = time.perf_counter()
            inputs = msg["inputs"]
            # a segment's inputs side by side (each a request to its producer's blob server),
            # then checked against their producers' roots in a fixed order
            blobs_in = list(pool.map(lambda a: peers[a[0]].get(a[1]), inputs.values()))
            fetched = sum(len(d) for d in blobs_in)
            for (name, (_, _, root, producer)), data in zip(inputs.items(), blobs_in, strict=True):
                holder.receive(name, tensor_from(data), bytes.fromhex(root), producer)
            t1 = time.perf_counter()
            out = holder.run(seg, public, cfg)
            t2 = time.perf_counter()
            outputs = {}
            for name, t in out.items():
                if name in slot.mine:
                    data = tensor_bytes(t)
                    outputs[name] = [own.put(data), boundary_root(t).hex(), len(data)]
                elif name in holder.state:
                    slot.pending[name] = t
            now = slot.held()
            if sum(now.values()) > sum(slot.peak.values()):
                slot.peak = now
            reply = {"outputs": outputs, "fetch_s": t1 - t0, "compute_s": t2 - t1,
                     "fetched": fetched}  # fmt: skip
            if "loss" in out:
                reply["loss_bits"] = int(out["loss"].view(torch.int32).item())
        elif cmd == "end_step":  # S_{t+1}: the state this stage computed; drop the step's values
            slot = slots[msg["key"]]
            slot.holder.state.update(slot.pending)
            slot.pending = {}
            slot.holder.values.clear()
            slot.holder.received.clear()
            empty(blobs)  # the step's boundary blobs are no longer read
        elif cmd == "state":
            slot = slots[msg["key"]]
            torch.save(slot.holder.state, msg["path"])
            reply = {"state_bytes": slot.holder.state_bytes(),
                     "peak_held_bytes": sum(slot.peak.values()), "peak_held": slot.peak,
                     "worker_peak_rss_kib": peak_rss_kib()}  # fmt: skip
        elif cmd == "counters":
            out = {}
            for dev in Path("/sys/class/net").iterdir():
                if dev.name.startswith("v"):
                    st = dev / "statistics"
                    out[dev.name] = [int((st / "tx_bytes").read_text()),
                                     int((st / "rx_bytes").read_text())]  # fmt: skip
            reply = {"counters": out}
        elif cmd == "quit":
            break
        print(json.dumps(reply), flush=True)
    server.stop()
    return 0


# -- the coordinator (root namespace) ------------------------------------------------------------


class Net:
    """The namespaces, links, proxies and stage processes; `close` undoes all of it."""

    def __init__(self, work: Path):
        self.work = work
        self.made: list[str] = []
        self.procs: list[subprocess.Popen] = []
        self.workers: dict[int, subprocess.Popen] = {}

    def sh(self, *cmd: str) -> None:
        subprocess.run(cmd, check=True, capture_output=True)

    def up(self) -> None:
        for i in range(NODES):
            subprocess.run(["ip", "netns", "del", ns(i)], capture_output=True)  # a stale one
            self.sh("ip", "netns", "add", ns(i))
            self.made.append(ns(i))
            self.sh("ip", "-n", ns(i), "link", "set", "lo", "up")
        for k, i, j in pairs():
            rtt, mbit = link_params(i, j)
            a, b = f"v{i}x{j}", f"v{j}x{i}"
            self.sh("ip", "link", "add", a, "netns", ns(i), "type", "veth", "peer", "name", b,
                    "netns", ns(j))  # fmt: skip
            for who, dev in ((i, a), (j, b)):
                self.sh("ip", "-n", ns(who), "addr", "add", peer_ip(k, i, j, who) + "/30",
                        "dev", dev)  # fmt: skip
                self.sh("ip", "-n", ns(who), "link", "set", dev, "up")
                burst = max(32_000, mbit * 1_000_000 // 8 // 100)  # >= rate / HZ
                self.sh("ip", "netns", "exec", ns(who), "tc", "qdisc", "add", "dev", dev, "root",
                        "tbf", "rate", f"{mbit}mbit", "burst", str(burst),
                        "latency", "100ms")  # fmt: skip

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        for i in range(NODES):
            routes = []
            for k, a, b in pairs():
                if i in (a, b):
                    j = b if i == a else a
                    rtt, _ = link_params(i, j)
                    routes.append(f"{PROXY_BASE + j}:{peer_ip(k, a, b, j)}:{BLOB_PORT}:{rtt / 2}")
            proxy = subprocess.Popen(
                ["ip", "netns", "exec", ns(i), sys.executable, "-m", "tools.delayproxy", *routes],
                stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)  # fmt: skip
            self.procs.append(proxy)
            assert proxy.stdout.readline().strip() == "ready"
            w = subprocess.Popen(
                # the bench's own priority (run it under `nice`): a worker niced below its
                # proxies and the coordinator would starve first on a shared machine
                ["ip", "netns", "exec", ns(i), sys.executable, "-m",
                 "bench.pipeline_bench", "--worker", str(i), str(self.work)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                env=env)  # fmt: skip
            self.procs.append(w)
            self.workers[i] = w
        for i, w in self.workers.items():
            assert json.loads(w.stdout.readline()) == {"ready": i}

    def ask(self, i: int, **msg) -> dict:
        w = self.workers[i]
        w.stdin.write(json.dumps(msg) + "\n")
        w.stdin.flush()
        line = w.stdout.readline()
        if not line:
            raise RuntimeError(f"stage process {i} died (exit {w.wait()})")
        return json.loads(line)

    def close(self) -> None:
        for p in self.procs:  # only the processes this bench started, by their ids
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        for name in self.made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self.made = []


def build(P: int):
    import torch

    from agents.model.lower import Optimizer, Recipe, build_bundle
    from examples.models.char_gpt import GPT

    torch.manual_seed(0)
    module = GPT(vocab=VOCAB, d=D, heads=HEADS, layers=LAYERS, block_size=T)
    opt = Optimizer("adamw", 1e-3, weight_decay=0.1)
    return build_bundle(module, opt, BATCH, "lm", (T,), VOCAB, recipe=Recipe(M), stages=P), opt


def publics(bundle, opt, work: Path) -> list[Path]:
    import torch

    out = []
    hyper = [torch.tensor(v, dtype=torch.float32) for v in opt.hyper().values()]
    for t in range(STEPS):
        g = torch.Generator().manual_seed(100 + t)
        x = torch.randint(0, VOCAB, (BATCH, T), generator=g)
        y = torch.randint(0, VOCAB, (BATCH, T), generator=g)
        pub = {f"hp.{k}": h for k, h in zip(bundle.hyper, hyper, strict=True)} | {"x": x, "y": y}
        path = work / f"public{t}.pt"
        torch.save(pub, path)
        out.append(path)
    return out


def reference(bundle, state: dict, pubs: list[Path]) -> tuple[bytes, list[int]]:
    import torch

    from agents.model.job import state_root
    from agents.training.run import run_graph

    st, losses = dict(state), []
    for path in pubs:
        pub = torch.load(path)
        public = bundle.step.inputs[len(bundle.state) :]
        ins = [st[v.name] for v in bundle.state] + [pub[v.name] for v in public]
        out, _ = run_graph(bundle.step, ins)
        st = {v.name: out[v.name] for v in bundle.state}
        losses.append(int(out["loss"].view(torch.int32).item()))
    return state_root(st), losses


def one_zone_probability(P: int) -> float:
    """The chance that P distinct nodes drawn uniformly all lie in one zone."""
    sizes = [ZONES.count(z) for z in set(ZONES)]
    return sum(math.comb(n, P) for n in sizes) / math.comb(NODES, P)


def run_placements(net: Net, P: int, placements: dict[str, tuple[int, ...]], files: dict, plan,
                   pubs) -> dict:  # fmt: skip
    """Each placement from S_0 for STEPS steps, their steps interleaved (step t of every
    placement, in a shuffled order, before step t + 1 of any): a load spike of the shared
    machine falls on all of them alike."""
    import torch

    from agents.model.job import state_root
    from agents.model.stages import value_name

    first = set(range(NODES))
    for key, nodes in placements.items():
        for s, i in enumerate(nodes):
            net.ask(i, cmd="load", key=key, bundle=str(files["bundle"]), stage=s,
                    state=str(files["state"][s]), first=i in first)  # fmt: skip
            first.discard(i)
    producer = {value_name(v): p for v, p, _ in plan.boundaries}
    reads = files["reads"]
    steps = {k: [] for k in placements}
    payload = {k: {} for k in placements}
    wire = {k: {} for k in placements}
    losses = {k: [] for k in placements}
    split = {k: {"fetch_s": 0.0, "compute_s": 0.0} for k in placements}
    order = random.Random(P)
    for t in range(STEPS):
        keys = list(placements)
        order.shuffle(keys)
        for key in keys:
            nodes = placements[key]
            before = {i: net.ask(i, cmd="counters")["counters"] for i in set(nodes)}
            t0 = time.perf_counter()
            published: dict[str, list] = {}
            for k, (s, _) in enumerate(plan.schedule):
                inputs = {}
                for name in reads[k]:
                    if name in producer and producer[name] != s:
                        addr, root, nbytes = published[name]
                        src = nodes[producer[name]]
                        inputs[name] = [src, addr, root, producer[name]]
                        link = f"n{src}->n{nodes[s]}"
                        payload[key][link] = payload[key].get(link, 0) + nbytes
                r = net.ask(nodes[s], cmd="run", key=key, k=k, public=str(pubs[t]),
                            inputs=inputs)  # fmt: skip
                published |= r["outputs"]
                split[key]["fetch_s"] += r["fetch_s"]
                split[key]["compute_s"] += r["compute_s"]
                if "loss_bits" in r:
                    losses[key].append(r["loss_bits"])
            for i in nodes:
                net.ask(i, cmd="end_step", key=key)
            steps[key].append(time.perf_counter() - t0)
            for i in set(nodes):
                after = net.ask(i, cmd="counters")["counters"]
                for dev, (tx, _) in after.items():
                    sent = tx - before[i][dev][0]
                    if sent > 10_000:  # a link this step used (not the odd ARP or TCP close)
                        link = f"n{i}->n{int(dev.split('x')[1])}"
                        wire[key][link] = wire[key].get(link, 0) + sent
    out = {}
    for key, nodes in placements.items():
        stages, merged = [], {}
        for s, i in enumerate(nodes):
            path = files["work"] / f"out{P}_{key}_{s}.pt"
            info = net.ask(i, cmd="state", key=key, path=str(path))
            merged |= torch.load(path)
            stages.append({"stage": s, "node": i} | info)
        merged = {n: merged[n] for n in files["order"]}  # state order, as the root commits it
        out[key] = {
            "nodes": [f"n{i}" for i in nodes],
            "zones": [f"{ZONES[i] >> 8}.{ZONES[i] & 255}" for i in nodes],
            "step_s": [round(x, 3) for x in steps[key]],
            "median_step_s": round(statistics.median(steps[key]), 3),
            # the stage processes' own seconds a step: fetching inputs, running segments
            "fetch_s_per_step": round(split[key]["fetch_s"] / STEPS, 3),
            "compute_s_per_step": round(split[key]["compute_s"] / STEPS, 3),
            "payload_bytes_per_step": {k: v // STEPS for k, v in sorted(payload[key].items())},
            "wire_bytes_per_step": {k: v // STEPS for k, v in sorted(wire[key].items())},
            "stages": stages,
            "final_root": "0x" + state_root(merged).hex(),
            "losses": losses[key],
        }
    return out


def main() -> int:
    if os.geteuid() != 0:
        print("error: the pipeline bench needs root (ip netns, tc): sudo .venv/bin/python -m "
              "bench.pipeline_bench", file=sys.stderr)  # fmt: skip
        return 2
    import torch

    from agents.core.blobs import BlobStore, LocalDirBackend
    from agents.model.stage_placement import Candidate, Link, pipeline_demand, place_stages
    from agents.model.stage_plan import StagePlan
    from agents.model.stages import segment

    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="vtp-pipe-"))
    os.chmod(work, 0o755)
    net = Net(work)

    def stop(signum, _frame):
        net.close()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    result: dict = {"machine": {"cpus": os.cpu_count(), "load_at_start": os.getloadavg()[0]}}
    try:
        builds = {P: build(P) for P in (2, 4)}
        low2, opt = builds[2]
        state = dict(low2.state)
        total = sum(t.nbytes for t in state.values())
        pubs = publics(low2.bundle, opt, work)
        ref_root, ref_losses = reference(low2.bundle, state, pubs)
        files = {}
        for P, (low, _) in builds.items():
            assert low.bundle.step.nodes == low2.bundle.step.nodes  # one step graph, P plans
            plan = StagePlan.from_obj(low.bundle.stages)
            bpath = work / f"bundle{P}.bin"
            bpath.write_bytes(low.bundle.to_bytes())
            spaths = []
            for s, names in enumerate(plan.state):
                path = work / f"state{P}_{s}.pt"
                torch.save({n: state[n] for n in names}, path)
                spaths.append(path)
            reads = [[v.name for v in segment(low.bundle.step, plan, k).graph.inputs]
                     for k in range(len(plan.schedule))]  # fmt: skip
            files[P] = {"bundle": bpath, "state": spaths, "reads": reads, "work": work,
                        "plan": plan, "order": list(state)}  # fmt: skip
        for i in range(NODES):
            (work / f"blobs{i}").mkdir()
        net.up()
        net.start()
        # measure every pair: node i fetches a small and a 2 MB blob from node j's server
        rng = random.Random(43)
        links, measured = {}, {}
        for _, i, j in pairs():
            store = BlobStore(LocalDirBackend(work / f"blobs{j}"))
            small = store.put(rng.randbytes(64))
            big = store.put(rng.randbytes(2 << 20))
            r = net.ask(i, cmd="probe", peer=j, small=small, big=big)
            links[(f"n{i}", f"n{j}")] = Link(r["throughput_mbps"], r["latency_ms"])
            measured[f"n{i}-n{j}"] = {k: round(v, 1) for k, v in r.items()}
            empty(work / f"blobs{j}")
        result["links_measured"] = measured
        full = work / "state_full.pt"
        torch.save(state, full)
        for i in range(NODES):
            net.ask(i, cmd="warm", bundle=str(files[2]["bundle"]), state=str(full),
                    public=str(pubs[0]))  # fmt: skip
        result["topology"] = {
            "nodes": NODES, "zones": [f"{z >> 8}.{z & 255}" for z in ZONES],
            "within_zone": {"rtt_ms": FAST[0], "mbit_s": FAST[1]},
            "across_zones": {"rtt_ms": SLOW[0], "mbit_s": SLOW[1]},
            "emulation": "a veth per pair, tc tbf at both ends; tools/delayproxy.py adds "
            "rtt/2 each way in the fetching side's namespace",
        }  # fmt: skip
        cands = [Candidate(f"n{i}", 4096, 1000, ZONES[i]) for i in range(NODES)]
        result["model"] = {"gpt": {"vocab": VOCAB, "d": D, "heads": HEADS, "layers": LAYERS,
                                   "block": T}, "batch": BATCH, "micro_batches": M,
                           "steps": STEPS, "state_bytes": total,
                           "one_process_root": "0x" + ref_root.hex()}  # fmt: skip
        draw = random.Random(7)
        for P in (2, 4):
            f = files[P]
            plan = f["plan"]
            demand = pipeline_demand(
                low2.bundle.step, plan, {n: t.nbytes for n, t in state.items()}
            )
            aware = place_stages(demand, cands, links)
            placements = {"aware": tuple(int(n[1:]) for n in aware.nodes)}
            for r in range(RANDOM_DRAWS):
                placements[f"random{r}"] = tuple(draw.sample(range(NODES), P))
            runs = run_placements(net, P, placements, f, plan, pubs)
            runs["aware"]["estimated_step_s"] = round(aware.step_s, 3)
            runs["aware"]["tier"] = aware.tier
            rand = statistics.mean(runs[f"random{r}"]["median_step_s"] for r in range(RANDOM_DRAWS))
            equal = all(x["final_root"] == "0x" + ref_root.hex() for x in runs.values())
            biggest = max(s["state_bytes"] for x in runs.values() for s in x["stages"])
            result[f"P{P}"] = {
                "boundary_tensors": len(plan.boundaries),
                "traffic": [
                    {"stages": [a, b], "bytes": n, "tensors": m} for a, b, n, m in demand.traffic
                ],  # fmt: skip
                "runs": runs,
                "ratio_random_over_aware": round(rand / runs["aware"]["median_step_s"], 2),
                # how often a random placement keeps to one zone: in these draws, and the
                # probability under a uniform draw of P of the nodes
                "random_draws_in_one_zone": sum(
                    len({x["zones"][0]} | set(x["zones"])) == 1
                    for k, x in runs.items()
                    if k != "aware"
                ),
                "random_draws": RANDOM_DRAWS,
                "one_zone_probability": round(one_zone_probability(P), 3),
                "goal_2x_met": rand / runs["aware"]["median_step_s"] >= 2,
                "final_state_equals_one_process_run": equal,
                "losses_equal": all(x["losses"] == ref_losses for x in runs.values()),
                "largest_stage_state_over_whole": round(biggest / total, 3),
                "one_over_P": round(1 / P, 3),
                # the aware run's stages: state against the whole model's, and what each held at
                # its peak between segments (boundary buffers, the activations its backward reads)
                "stage_memory": [
                    {
                        "stage": s["stage"],
                        "state_over_whole": round(s["state_bytes"] / total, 3),
                        "peak_held_over_whole": round(s["peak_held_bytes"] / total, 3),
                        "peak_held": s["peak_held"],
                        "worker_peak_rss_mib": round(s["worker_peak_rss_kib"] / 1024, 1),
                    }
                    for s in runs["aware"]["stages"]
                ],
            }
        result["seconds"] = round(time.time() - started, 1)
        # the machine is shared: under load its CPUs, not the links, set the step time
        result["machine"]["load_at_end"] = os.getloadavg()[0]
    finally:
        net.close()
        shutil.rmtree(work, ignore_errors=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "runs"} if k.startswith("P")
                      else v for k, v in result.items()}, indent=1))  # fmt: skip
    ok = all(result[f"P{P}"]["final_state_equals_one_process_run"] for P in (2, 4))
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        sys.exit(worker(int(sys.argv[2]), Path(sys.argv[3])))
    sys.exit(main())
