// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {Float32} from "../libraries/Float32.sol";
import {RepOps} from "../libraries/RepOps.sol";
import {TensorMerkle} from "../libraries/TensorMerkle.sol";

/// @title OpHarness — external entry points to RepOps and TensorMerkle for tests and benches
/// @notice Every function forwards to the library function of the same name; batch forms
///         (suffix Many / Row) evaluate one element per array entry so one eth_call checks many
///         elements. Values are binary32 bit patterns as uint32.
contract OpHarness {
    // Array length mismatches revert with RepOps.LengthMismatch(lengthA, lengthB).

    /// @notice An operation selector outside the documented range.
    /// @param op The selector that was given.
    error UnknownOp(uint256 op);

    // ---------------------------------------------------------------- reductions

    /// @notice RepOps.dot: one element of matmul_nt.
    /// @param a Row of A.
    /// @param b Row of B.
    /// @return The dot product.
    function dot(uint32[] calldata a, uint32[] calldata b) external pure returns (uint32) {
        return RepOps.dot(a, b);
    }

    /// @notice Every element of matmul_nt(A, B) for row-major A (m × k) and B (n × k).
    /// @param a A, row-major, m·k entries.
    /// @param b B, row-major, n·k entries.
    /// @param k The inner size.
    /// @return c C (m × n), row-major.
    function matmulNt(uint32[] calldata a, uint32[] calldata b, uint256 k)
        external
        pure
        returns (uint32[] memory c)
    {
        if (k == 0 || a.length % k != 0 || b.length % k != 0) {
            revert RepOps.LengthMismatch(a.length, b.length);
        }
        // The divisions are exact (checked above), so multiplying their results loses nothing.
        // slither-disable-start divide-before-multiply
        uint256 m = a.length / k;
        uint256 n = b.length / k;
        c = new uint32[](m * n);
        for (uint256 i = 0; i < m; ++i) {
            for (uint256 j = 0; j < n; ++j) {
                c[i * n + j] = RepOps.dot(a[i * k:(i + 1) * k], b[j * k:(j + 1) * k]);
            }
        }
        // slither-disable-end divide-before-multiply
    }

    /// @notice RepOps.rowSum.
    /// @param row The row.
    /// @return The sum.
    function rowSum(uint32[] calldata row) external pure returns (uint32) {
        return RepOps.rowSum(row);
    }

    /// @notice RepOps.rowMax.
    /// @param row The row (non-empty).
    /// @return The maximum.
    function rowMax(uint32[] calldata row) external pure returns (uint32) {
        return RepOps.rowMax(row);
    }

    /// @notice RepOps.mean.
    /// @param row The row (non-empty).
    /// @return The mean.
    function mean(uint32[] calldata row) external pure returns (uint32) {
        return RepOps.mean(row);
    }

    /// @notice RepOps.average.
    /// @param p The values P_s[i,j] in aggregation order.
    /// @param w The weights.
    /// @return The weighted sum.
    function average(uint32[] calldata p, uint32[] calldata w) external pure returns (uint32) {
        return RepOps.average(p, w);
    }

    // ---------------------------------------------------------------- element-wise

    /// @notice RepOps.exp32.
    /// @param x Operand.
    /// @return exp32(x).
    function exp32(uint32 x) external pure returns (uint32) {
        return RepOps.exp32(x);
    }

    /// @notice RepOps.log32.
    /// @param x Operand.
    /// @return log32(x).
    function log32(uint32 x) external pure returns (uint32) {
        return RepOps.log32(x);
    }

    /// @notice RepOps.tanh32.
    /// @param x Operand.
    /// @return tanh32(x).
    function tanh32(uint32 x) external pure returns (uint32) {
        return RepOps.tanh32(x);
    }

    /// @notice RepOps.erf32.
    /// @param x Operand.
    /// @return erf32(x).
    function erf32(uint32 x) external pure returns (uint32) {
        return RepOps.erf32(x);
    }

    /// @notice Element-wise unary operator: 0 exp32, 1 log32, 2 relu, 3 tanh32, 4 erf32.
    /// @param op The operator selector.
    /// @param x Operands.
    /// @return r Results.
    function unaryMany(uint256 op, uint32[] calldata x) external pure returns (uint32[] memory r) {
        if (op > 4) revert UnknownOp(op);
        r = new uint32[](x.length);
        for (uint256 i = 0; i < x.length; ++i) {
            if (op == 0) r[i] = RepOps.exp32(x[i]);
            else if (op == 1) r[i] = RepOps.log32(x[i]);
            else if (op == 2) r[i] = RepOps.relu(x[i]);
            else if (op == 3) r[i] = RepOps.tanh32(x[i]);
            else r[i] = RepOps.erf32(x[i]);
        }
    }

    /// @notice Gas of each unary operator call (op as in unaryMany: 0 exp32, 1 log32, 2 relu,
    ///         3 tanh32, 4 erf32),
    ///         measured with gasleft() around the library call minus one bare gasleft().
    /// @param op The operator selector.
    /// @param x Operands.
    /// @return gasUsed Per-call gas.
    /// @return sink XOR of the results (keeps the calls observable).
    function gasOfUnaryMany(uint256 op, uint32[] calldata x)
        external
        view
        returns (uint256[] memory gasUsed, uint32 sink)
    {
        if (op > 4) revert UnknownOp(op);
        gasUsed = new uint256[](x.length);
        for (uint256 i = 0; i < x.length; ++i) {
            uint32 v = x[i];
            uint32 r;
            uint256 g0;
            uint256 g1;
            uint256 g2;
            if (op == 0) {
                g0 = gasleft();
                g1 = gasleft();
                r = RepOps.exp32(v);
                g2 = gasleft();
            } else if (op == 1) {
                g0 = gasleft();
                g1 = gasleft();
                r = RepOps.log32(v);
                g2 = gasleft();
            } else if (op == 2) {
                g0 = gasleft();
                g1 = gasleft();
                r = RepOps.relu(v);
                g2 = gasleft();
            } else if (op == 3) {
                g0 = gasleft();
                g1 = gasleft();
                r = RepOps.tanh32(v);
                g2 = gasleft();
            } else {
                g0 = gasleft();
                g1 = gasleft();
                r = RepOps.erf32(v);
                g2 = gasleft();
            }
            gasUsed[i] = (g1 - g2) - (g0 - g1);
            sink ^= r;
        }
    }

    /// @notice Element-wise binary operator: 0 addRow(a, b), 1 subCol(a, b), 2 divCol(a, b),
    ///         3 nll(a, b), 4 reluBwd(g = a, x = b).
    /// @param op The operator selector.
    /// @param a First operands.
    /// @param b Second operands (same length).
    /// @return r Results.
    function binaryMany(uint256 op, uint32[] calldata a, uint32[] calldata b)
        external
        pure
        returns (uint32[] memory r)
    {
        if (a.length != b.length) revert RepOps.LengthMismatch(a.length, b.length);
        if (op > 4) revert UnknownOp(op);
        r = new uint32[](a.length);
        for (uint256 i = 0; i < a.length; ++i) {
            if (op == 0) r[i] = RepOps.addRow(a[i], b[i]);
            else if (op == 1) r[i] = RepOps.subCol(a[i], b[i]);
            else if (op == 2) r[i] = RepOps.divCol(a[i], b[i]);
            else if (op == 3) r[i] = RepOps.nll(a[i], b[i]);
            else r[i] = RepOps.reluBwd(a[i], b[i]);
        }
    }

    /// @notice RepOps.relu.
    /// @param x Operand.
    /// @return relu(x).
    function relu(uint32 x) external pure returns (uint32) {
        return RepOps.relu(x);
    }

    /// @notice RepOps.reluBwd.
    /// @param g Incoming gradient.
    /// @param x Pre-activation.
    /// @return The gradient.
    function reluBwd(uint32 g, uint32 x) external pure returns (uint32) {
        return RepOps.reluBwd(g, x);
    }

    /// @notice RepOps.addRow.
    /// @param a A[i,j].
    /// @param bj b[0,j].
    /// @return The sum.
    function addRow(uint32 a, uint32 bj) external pure returns (uint32) {
        return RepOps.addRow(a, bj);
    }

    /// @notice RepOps.subCol.
    /// @param a A[i,j].
    /// @param ci c[0,i].
    /// @return The difference.
    function subCol(uint32 a, uint32 ci) external pure returns (uint32) {
        return RepOps.subCol(a, ci);
    }

    /// @notice RepOps.divCol.
    /// @param a A[i,j].
    /// @param ci c[0,i].
    /// @return The quotient.
    function divCol(uint32 a, uint32 ci) external pure returns (uint32) {
        return RepOps.divCol(a, ci);
    }

    /// @notice RepOps.nll.
    /// @param l L[0,b].
    /// @param s S[b, y[b]].
    /// @return The loss element.
    function nll(uint32 l, uint32 s) external pure returns (uint32) {
        return RepOps.nll(l, s);
    }

    /// @notice RepOps.xentGrad.
    /// @param p P[b,c].
    /// @param c Class index.
    /// @param label y[b].
    /// @param batch B.
    /// @return The gradient element.
    function xentGrad(uint32 p, uint256 c, uint256 label, uint256 batch)
        external
        pure
        returns (uint32)
    {
        return RepOps.xentGrad(p, c, label, batch);
    }

    /// @notice RepOps.xentGrad for every class c of one row P[b,:].
    /// @param p The row P[b,:].
    /// @param label y[b].
    /// @param batch B.
    /// @return r The gradient row.
    function xentGradRow(uint32[] calldata p, uint256 label, uint256 batch)
        external
        pure
        returns (uint32[] memory r)
    {
        r = new uint32[](p.length);
        for (uint256 c = 0; c < p.length; ++c) {
            r[c] = RepOps.xentGrad(p[c], c, label, batch);
        }
    }

    /// @notice RepOps.momentum.
    /// @param mu Momentum μ.
    /// @param v Old buffer element.
    /// @param g Gradient element.
    /// @return The new buffer element.
    function momentum(uint32 mu, uint32 v, uint32 g) external pure returns (uint32) {
        return RepOps.momentum(mu, v, g);
    }

    /// @notice RepOps.momentum element-wise.
    /// @param mu Momentum μ.
    /// @param v Old buffer elements.
    /// @param g Gradient elements (same length).
    /// @return r The new buffer elements.
    function momentumMany(uint32 mu, uint32[] calldata v, uint32[] calldata g)
        external
        pure
        returns (uint32[] memory r)
    {
        if (v.length != g.length) revert RepOps.LengthMismatch(v.length, g.length);
        r = new uint32[](v.length);
        for (uint256 i = 0; i < v.length; ++i) {
            r[i] = RepOps.momentum(mu, v[i], g[i]);
        }
    }

    /// @notice RepOps.sgd.
    /// @param lr Learning rate η.
    /// @param w Weight element.
    /// @param vNew New buffer element.
    /// @return The new weight.
    function sgd(uint32 lr, uint32 w, uint32 vNew) external pure returns (uint32) {
        return RepOps.sgd(lr, w, vNew);
    }

    /// @notice RepOps.sgd element-wise.
    /// @param lr Learning rate η.
    /// @param w Weight elements.
    /// @param vNew New buffer elements (same length).
    /// @return r The new weights.
    function sgdMany(uint32 lr, uint32[] calldata w, uint32[] calldata vNew)
        external
        pure
        returns (uint32[] memory r)
    {
        if (w.length != vNew.length) revert RepOps.LengthMismatch(w.length, vNew.length);
        r = new uint32[](w.length);
        for (uint256 i = 0; i < w.length; ++i) {
            r[i] = RepOps.sgd(lr, w[i], vNew[i]);
        }
    }

    // ---------------------------------------------------------------- batch schedule

    /// @notice RepOps.batchIndex.
    /// @param seed Data seed.
    /// @param t Step.
    /// @param j Position in the batch.
    /// @param n Number of examples.
    /// @return The example index.
    function batchIndex(uint256 seed, uint256 t, uint256 j, uint256 n)
        external
        pure
        returns (uint256)
    {
        return RepOps.batchIndex(seed, t, j, n);
    }

    /// @notice RepOps.batchIndex for j = 0 … batch−1.
    /// @param seed Data seed.
    /// @param t Step.
    /// @param batch Batch size B.
    /// @param n Number of examples.
    /// @return r The example indices.
    function batchIndices(uint256 seed, uint256 t, uint256 batch, uint256 n)
        external
        pure
        returns (uint256[] memory r)
    {
        r = new uint256[](batch);
        for (uint256 j = 0; j < batch; ++j) {
            r[j] = RepOps.batchIndex(seed, t, j, n);
        }
    }

    /// @notice RepOps.shardBatchIndex for j = 0 … batch−1 (shard s of S, PROTOCOL §4).
    /// @param seed Data seed.
    /// @param t Global step.
    /// @param batch Batch size B.
    /// @param n Number of examples N of the whole dataset.
    /// @param shards S.
    /// @param shard s.
    /// @return r The example indices (into the whole dataset).
    function shardBatchIndices(
        uint256 seed,
        uint256 t,
        uint256 batch,
        uint256 n,
        uint256 shards,
        uint256 shard
    ) external pure returns (uint256[] memory r) {
        r = new uint256[](batch);
        for (uint256 j = 0; j < batch; ++j) {
            r[j] = RepOps.shardBatchIndex(seed, t, j, n, shards, shard);
        }
    }

    // ---------------------------------------------------------------- commitments

    /// @notice The five domain tags (tensor, state, checkpoints, trace, dataset).
    /// @return tensor TENSOR_DOMAIN.
    /// @return state STATE_DOMAIN.
    /// @return checkpoints CHECKPOINT_DOMAIN.
    /// @return trace TRACE_DOMAIN.
    /// @return dataset DATASET_DOMAIN.
    function domains()
        external
        pure
        returns (bytes32 tensor, bytes32 state, bytes32 checkpoints, bytes32 trace, bytes32 dataset)
    {
        return (
            TensorMerkle.TENSOR_DOMAIN,
            TensorMerkle.STATE_DOMAIN,
            TensorMerkle.CHECKPOINT_DOMAIN,
            TensorMerkle.TRACE_DOMAIN,
            TensorMerkle.DATASET_DOMAIN
        );
    }

    /// @notice TensorMerkle.leafHash.
    /// @param chunk A 256-byte chunk.
    /// @return The leaf hash.
    function leafHash(bytes calldata chunk) external pure returns (bytes32) {
        return TensorMerkle.leafHash(chunk);
    }

    /// @notice TensorMerkle.elementAt.
    /// @param chunk A chunk.
    /// @param position Position 0..63.
    /// @return The element's bits.
    function elementAt(bytes calldata chunk, uint256 position) external pure returns (uint32) {
        return TensorMerkle.elementAt(chunk, position);
    }

    /// @notice TensorMerkle.depthFor.
    /// @param nLeaves Leaf count.
    /// @return The depth.
    function depthFor(uint256 nLeaves) external pure returns (uint256) {
        return TensorMerkle.depthFor(nLeaves);
    }

    /// @notice TensorMerkle.tensorRoot.
    /// @param dtype dtype code.
    /// @param rows Row count.
    /// @param cols Column count.
    /// @param dataRoot Data root.
    /// @return The tensor root.
    function tensorRoot(uint256 dtype, uint256 rows, uint256 cols, bytes32 dataRoot)
        external
        pure
        returns (bytes32)
    {
        return TensorMerkle.tensorRoot(dtype, rows, cols, dataRoot);
    }

    /// @notice TensorMerkle.verifyLeaf.
    /// @param dataRoot Expected data root.
    /// @param numel Element count.
    /// @param leafIndex Leaf index.
    /// @param chunk The chunk.
    /// @param siblings Siblings bottom-up.
    /// @return Whether the proof is valid.
    function verifyLeaf(
        bytes32 dataRoot,
        uint256 numel,
        uint256 leafIndex,
        bytes calldata chunk,
        bytes32[] calldata siblings
    ) external pure returns (bool) {
        return TensorMerkle.verifyLeaf(dataRoot, numel, leafIndex, chunk, siblings);
    }

    /// @notice TensorMerkle.verifyElement.
    /// @param root Tensor root.
    /// @param dtype dtype code.
    /// @param rows Row count.
    /// @param cols Column count.
    /// @param element Row-major element index.
    /// @param chunk The chunk of leaf element / 64.
    /// @param siblings Siblings bottom-up.
    /// @return ok Whether the proof is valid.
    /// @return value The element's bits.
    function verifyElement(
        bytes32 root,
        uint256 dtype,
        uint256 rows,
        uint256 cols,
        uint256 element,
        bytes calldata chunk,
        bytes32[] calldata siblings
    ) external pure returns (bool ok, uint32 value) {
        return TensorMerkle.verifyElement(root, dtype, rows, cols, element, chunk, siblings);
    }

    /// @notice TensorMerkle.verifyRange.
    /// @param root Tensor root.
    /// @param dtype dtype code.
    /// @param rows Row count.
    /// @param cols Column count.
    /// @param firstLeaf First covered leaf.
    /// @param chunks Covered chunks, concatenated.
    /// @param siblings Neighbour hashes.
    /// @return Whether the proof is valid.
    function verifyRange(
        bytes32 root,
        uint256 dtype,
        uint256 rows,
        uint256 cols,
        uint256 firstLeaf,
        bytes calldata chunks,
        bytes32[] calldata siblings
    ) external pure returns (bool) {
        return TensorMerkle.verifyRange(root, dtype, rows, cols, firstLeaf, chunks, siblings);
    }

    /// @notice TensorMerkle.verifyListEntry.
    /// @param root List root.
    /// @param domain Domain tag.
    /// @param n Number of values.
    /// @param index Entry index.
    /// @param value Entry value.
    /// @param siblings Siblings bottom-up.
    /// @return Whether the proof is valid.
    function verifyListEntry(
        bytes32 root,
        bytes32 domain,
        uint256 n,
        uint256 index,
        bytes32 value,
        bytes32[] calldata siblings
    ) external pure returns (bool) {
        return TensorMerkle.verifyListEntry(root, domain, n, index, value, siblings);
    }

    /// @notice TensorMerkle.listRootOf.
    /// @param domain Domain tag.
    /// @param values The values.
    /// @return The list root.
    function listRootOf(bytes32 domain, bytes32[] calldata values)
        external
        pure
        returns (bytes32)
    {
        return TensorMerkle.listRootOf(domain, values);
    }

    /// @notice TensorMerkle.stateEntry.
    /// @param name Tensor name.
    /// @param root Tensor root.
    /// @return The state entry.
    function stateEntry(string calldata name, bytes32 root) external pure returns (bytes32) {
        return TensorMerkle.stateEntry(name, root);
    }

    /// @notice TensorMerkle.datasetRoot.
    /// @param featuresRoot X's tensor root.
    /// @param labelsRoot Y's tensor root.
    /// @return The dataset root.
    function datasetRoot(bytes32 featuresRoot, bytes32 labelsRoot)
        external
        pure
        returns (bytes32)
    {
        return TensorMerkle.datasetRoot(featuresRoot, labelsRoot);
    }

    /// @notice Float32.canonical element-wise (NaN → 0x7FC00000), for commitment encoding.
    /// @param x Operands.
    /// @return r Canonical patterns.
    function canonicalMany(uint32[] calldata x) external pure returns (uint32[] memory r) {
        r = new uint32[](x.length);
        for (uint256 i = 0; i < x.length; ++i) {
            r[i] = Float32.canonical(x[i]);
        }
    }
}
