// What a submitter computes before posting a version-1 (MLP) job, in plain JavaScript with ethers
// v6 and nothing else: the spec hash (PROTOCOL §5), the initial state root S_0 (§5, §4.2 word
// streams, §3 commitments) and the dispute config and its hash (§2.3 node list, §7.2 encoding).
// A reference for integrators in other languages: every function follows the PROTOCOL text, and
// tests/js/journey.test.mjs checks them against the chain while tests/js/test_journey_js.py
// checks them against the Python agents.

import { AbiCoder, concat, getBytes, keccak256, toUtf8Bytes } from "ethers";

const coder = AbiCoder.defaultAbiCoder();
const ZERO32 = "0x" + "00".repeat(32);
const tag = (text) => keccak256(toUtf8Bytes(text));

export const DTYPE_F32 = 1;
export const DTYPE_U32 = 2;
const TENSOR_DOMAIN = tag("vtp.tensor.v1");
const STATE_DOMAIN = tag("vtp.state.v1");
const GRAPH_DOMAIN = tag("vtp.graph.v1");
const STATE_CONFIG_DOMAIN = tag("vtp.stateconfig.v1");
const CHUNK_BYTES = 256; // 64 elements of 4 bytes

// §7.2 operator codes of the version-1 step graph.
export const OPS = {
  matmul_nt: 1, transpose: 2, add: 3, sub: 4, mul: 5, div: 6, add_row: 7, sub_col: 8,
  div_col: 9, relu: 10, relu_bwd: 11, row_sum: 12, row_max: 13, exp: 14, log: 15,
  gather_rows: 16, gather_labels: 17, xent_grad: 18, nll: 19, mean: 20, momentum: 21, sgd: 22,
};
const KIND_STATE = 1, KIND_NODE = 2, KIND_DATA_X = 3, KIND_DATA_Y = 4, KIND_BATCH = 5;
const OPERAND_T = "tuple(uint8,uint32,bytes32,uint8,uint32,uint32)";
const NODE_T = `tuple(uint8,uint8,uint32,uint32,uint256,${OPERAND_T}[])`;
const CONFIG_T = "tuple(bytes32,uint32,uint32,uint64,uint256,uint32,bytes32)";

// ---------------------------------------------------------------- §5: the spec hash

// Python's json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True). Numbers
// must be integers: JSON.parse loses precision past 2^53, so a larger seed must reach this
// function as a BigInt (parse the file with a big-number-aware parser).
export function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw new Error(`not a safe integer: ${value}`);
    return String(value);
  }
  if (typeof value === "string") return asciiString(value);
  if (value === null || typeof value === "boolean") return JSON.stringify(value);
  // Python sorts keys by code point; for the ASCII keys of a spec that is JavaScript's order
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${asciiString(k)}:${canonicalJson(value[k])}`).join(",")}}`;
}

function asciiString(text) {
  return JSON.stringify(text).replace(
    /[\u0080-\uffff]/g,
    (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"),
  );
}

export const specHash = (spec) => keccak256(toUtf8Bytes(canonicalJson(spec)));

// ---------------------------------------------------------------- §3: commitments

function merkleRoot(leaves) {
  let depth = 0;
  while (2 ** depth < leaves.length) depth += 1;
  let level = leaves.concat(Array(2 ** depth - leaves.length).fill(ZERO32));
  while (level.length > 1) {
    const up = [];
    for (let i = 0; i < level.length; i += 2) up.push(keccak256(concat([level[i], level[i + 1]])));
    level = up;
  }
  return level[0];
}

// `bytes`: the tensor's elements, 4 big-endian bytes each, row-major.
export function tensorRoot(dtype, rows, cols, bytes) {
  const leaves = [];
  for (let at = 0; at < bytes.length; at += CHUNK_BYTES) {
    const chunk = new Uint8Array(CHUNK_BYTES); // the last chunk zero-padded
    chunk.set(bytes.subarray(at, at + CHUNK_BYTES));
    leaves.push(keccak256(chunk));
  }
  return keccak256(
    coder.encode(
      ["bytes32", "uint256", "uint256", "uint256", "bytes32"],
      [TENSOR_DOMAIN, dtype, rows, cols, merkleRoot(leaves)],
    ),
  );
}

export function rootList(domain, values) {
  const leaves = values.map((v, i) =>
    keccak256(coder.encode(["bytes32", "uint256", "bytes32"], [domain, i, v])),
  );
  return keccak256(
    coder.encode(["bytes32", "uint256", "bytes32"], [domain, values.length, merkleRoot(leaves)]),
  );
}

// ---------------------------------------------------------------- §5: S_0 and its root

export function paramNames(widths) {
  const names = [];
  for (let i = 0; i + 1 < widths.length; i += 1) names.push(`w${i}`, `b${i}`);
  return names;
}

export const stateNames = (widths) => {
  const params = paramNames(widths);
  return params.concat(params.map((n) => `m.${n}`));
};

export function paramShape(widths, name) {
  const i = Number(name.replace(/^m\./, "").slice(1));
  return name.replace(/^m\./, "")[0] === "w" ? [widths[i + 1], widths[i]] : [1, widths[i + 1]];
}

// §4.2: block c of the stream of tag τ and seed s is keccak256(abi.encode(keccak256(τ), s, c)),
// eight big-endian uint32 words.
function streamWords(streamTag, seed, count) {
  const words = new Uint32Array(count);
  for (let c = 0; c * 8 < count; c += 1) {
    const block = getBytes(
      keccak256(coder.encode(["bytes32", "uint256", "uint256"], [tag(streamTag), seed, c])),
    );
    const view = new DataView(block.buffer, block.byteOffset);
    for (let j = 0; j < 8 && c * 8 + j < count; j += 1) words[c * 8 + j] = view.getUint32(4 * j);
  }
  return words;
}

// w{i} element e = fl(k · 2^-23) · 2^-s with k = (word_e >> 8) - 2^23 (exact in binary32),
// word_e of stream "vtp.init.v1" seeded keccak256(abi.encode(seed, i)), s = floor(ceil(log2 d_i)/2).
function initialWeights(widths, seed, layer) {
  const [rows, cols] = [widths[layer + 1], widths[layer]];
  const subSeed = BigInt(keccak256(coder.encode(["uint256", "uint256"], [seed, layer])));
  const words = streamWords("vtp.init.v1", subSeed, rows * cols);
  const shift = Math.floor((widths[layer] - 1).toString(2).length / 2);
  const bytes = new Uint8Array(4 * rows * cols);
  const view = new DataView(bytes.buffer);
  words.forEach((word, e) => view.setFloat32(4 * e, ((word >>> 8) - 2 ** 23) * 2 ** (-23 - shift)));
  return bytes;
}

export function initialStateRoot(spec) {
  const { widths } = spec.model;
  const entries = stateNames(widths).map((name) => {
    const [rows, cols] = paramShape(widths, name);
    const bytes = /^w\d+$/.test(name)
      ? initialWeights(widths, BigInt(spec.seed), Number(name.slice(1)))
      : new Uint8Array(4 * rows * cols); // biases and momentum buffers: +0
    const troot = tensorRoot(DTYPE_F32, rows, cols, bytes);
    return keccak256(coder.encode(["bytes32", "bytes32"], [tag(name), troot]));
  });
  return rootList(STATE_DOMAIN, entries);
}

// ---------------------------------------------------------------- §2.3 and §7.2: dispute config

// The node list of §2.3 for widths d0…dL and batch B: [name, op, inputs, [rows, cols], dtype].
export function buildStepGraph(widths, batch) {
  const nodes = [];
  const add = (name, op, inputs, shape, dtype = DTYPE_F32) => {
    nodes.push({ name, op, inputs, shape, dtype });
    return name;
  };
  const L = widths.length - 1;
  const B = batch;
  const acts = [add("x", "gather_rows", ["X", "idx"], [B, widths[0]])];
  const y = add("y", "gather_labels", ["Y", "idx"], [1, B], DTYPE_U32);
  const pre = [];
  for (let i = 0; i < L; i += 1) {
    const mm = add(`fwd${i}.mm`, "matmul_nt", [acts[i], `w${i}`], [B, widths[i + 1]]);
    pre.push(add(`fwd${i}.z`, "add_row", [mm, `b${i}`], [B, widths[i + 1]]));
    if (i < L - 1) acts.push(add(`fwd${i}.relu`, "relu", [pre[i]], [B, widths[i + 1]]));
  }
  const C = widths[L];
  const z = pre[L - 1];
  const mx = add("loss.max", "row_max", [z], [1, B]);
  const s = add("loss.shift", "sub_col", [z, mx], [B, C]);
  const e = add("loss.exp", "exp", [s], [B, C]);
  const se = add("loss.sum", "row_sum", [e], [1, B]);
  const p = add("loss.prob", "div_col", [e, se], [B, C]);
  const ls = add("loss.logsum", "log", [se], [1, B]);
  const nl = add("loss.nll", "nll", [ls, s, y], [1, B]);
  add("loss.mean", "mean", [nl], [1, 1]);
  let g = add("bwd.dz", "xent_grad", [p, y], [B, C]);
  const grads = {};
  for (let i = L - 1; i >= 0; i -= 1) {
    const gt = add(`bwd${i}.dzT`, "transpose", [g], [widths[i + 1], B]);
    const at = add(`bwd${i}.aT`, "transpose", [acts[i]], [widths[i], B]);
    grads[`w${i}`] = add(`bwd${i}.dw`, "matmul_nt", [gt, at], [widths[i + 1], widths[i]]);
    grads[`b${i}`] = add(`bwd${i}.db`, "row_sum", [gt], [1, widths[i + 1]]);
    if (i > 0) {
      const wt = add(`bwd${i}.wT`, "transpose", [`w${i}`], [widths[i], widths[i + 1]]);
      const da = add(`bwd${i}.da`, "matmul_nt", [g, wt], [B, widths[i]]);
      g = add(`bwd${i - 1}.dz`, "relu_bwd", [da, pre[i - 1]], [B, widths[i]]);
    }
  }
  const next = {};
  for (const name of paramNames(widths)) {
    const shape = paramShape(widths, name);
    const v = add(`upd.${name}.m`, "momentum", [`m.${name}`, grads[name]], shape);
    next[name] = add(`upd.${name}`, "sgd", [name, v], shape);
    next[`m.${name}`] = v;
  }
  return { nodes, next };
}

// The job's DisputeConfig over N = numExamples training examples (the dataset's, e.g. 1438 for
// sklearn-digits/train, §4.2) and its configHash = keccak256(abi.encode(DisputeConfig)).
export function disputeConfig(spec, numExamples) {
  const { widths } = spec.model;
  const { nodes, next } = buildStepGraph(widths, spec.batch);
  const names = stateNames(widths);
  const indexOf = new Map(nodes.map((n, i) => [n.name, i]));
  const operand = (ref) => {
    if (names.includes(ref)) {
      const [rows, cols] = paramShape(widths, ref);
      return [KIND_STATE, names.indexOf(ref), tag(ref), DTYPE_F32, rows, cols];
    }
    if (ref === "X") return [KIND_DATA_X, 0, ZERO32, DTYPE_F32, numExamples, widths[0]];
    if (ref === "Y") return [KIND_DATA_Y, 0, ZERO32, DTYPE_U32, 1, numExamples];
    if (ref === "idx") return [KIND_BATCH, 0, ZERO32, DTYPE_U32, 1, spec.batch];
    const src = nodes[indexOf.get(ref)];
    return [KIND_NODE, indexOf.get(ref), ZERO32, src.dtype, src.shape[0], src.shape[1]];
  };
  const params = { momentum: BigInt(spec.momentum), sgd: BigInt(spec.lr) };
  const descs = nodes.map((n) => [
    OPS[n.op], n.dtype, n.shape[0], n.shape[1], params[n.op] ?? 0n, n.inputs.map(operand),
  ]);
  const graphRoot = rootList(
    GRAPH_DOMAIN,
    descs.map((d) => keccak256(coder.encode([NODE_T], [d]))),
  );
  // The state list (§7.2): keccak256(abi.encode(keccak256(name), producer)) in state order.
  const stateList = rootList(
    STATE_CONFIG_DOMAIN,
    names.map((name) =>
      keccak256(coder.encode(["bytes32", "uint256"], [tag(name), indexOf.get(next[name])])),
    ),
  );
  const config = [
    graphRoot,
    descs.length,
    spec.batch,
    numExamples,
    BigInt(spec.seed),
    names.length,
    stateList,
  ];
  return { graphRoot, config, configHash: keccak256(coder.encode([CONFIG_T], [config])) };
}
