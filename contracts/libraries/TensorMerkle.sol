// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title TensorMerkle — verification of the protocol's tensor and root-list commitments
/// @notice PROTOCOL §3. A tensor's 32-bit elements (big-endian, row-major) are cut into
///         256-byte leaves of 64 elements (the last zero padded), leaf = keccak256(chunk); the
///         leaves are padded with bytes32(0) to 2^d, d = ceil(log2 L), node =
///         keccak256(left ‖ right). tensorRoot = keccak256(abi.encode(TENSOR_DOMAIN, dtype, rows,
///         cols, dataRoot)). A root list of n values under domain D commits as
///         keccak256(abi.encode(D, n, treeRoot)) over leaves keccak256(abi.encode(D, i, value_i)).
/// @dev Proof shapes match agents/training/merkle.py (ElementProof, RangeProof, ListProof):
///      siblings bottom-up; the depth is fixed by the tensor's size / the list's length, so a
///      proof of the wrong length is rejected. Verifiers return false on any mismatch and
///      revert (custom errors) only on malformed arguments (chunk length, empty shapes).
library TensorMerkle {
    /// @notice keccak256("vtp.tensor.v1").
    bytes32 internal constant TENSOR_DOMAIN = keccak256("vtp.tensor.v1");
    /// @notice keccak256("vtp.state.v1").
    bytes32 internal constant STATE_DOMAIN = keccak256("vtp.state.v1");
    /// @notice keccak256("vtp.checkpoints.v1").
    bytes32 internal constant CHECKPOINT_DOMAIN = keccak256("vtp.checkpoints.v1");
    /// @notice keccak256("vtp.trace.v1").
    bytes32 internal constant TRACE_DOMAIN = keccak256("vtp.trace.v1");
    /// @notice keccak256("vtp.dataset.v1").
    bytes32 internal constant DATASET_DOMAIN = keccak256("vtp.dataset.v1");

    /// @notice dtype code of float32 tensors.
    uint256 internal constant DTYPE_F32 = 1;
    /// @notice dtype code of uint32 tensors (labels).
    uint256 internal constant DTYPE_U32 = 2;
    /// @notice Elements per leaf.
    uint256 internal constant LEAF_ELEMS = 64;
    /// @notice Bytes per leaf chunk.
    uint256 internal constant LEAF_BYTES = 256;

    /// @notice A chunk (or concatenation of chunks) has a length that is not a multiple of 256,
    ///         or is empty.
    /// @param length The byte length given.
    error BadChunkLength(uint256 length);

    /// @notice An element position inside a chunk is not below 64, or the element index is not
    ///         below the tensor's element count.
    /// @param position The position / index given.
    /// @param limit The exclusive bound it had to respect.
    error PositionOutOfRange(uint256 position, uint256 limit);

    /// @notice A tensor with zero elements or a root list with zero values (not committable).
    error EmptyCommitment();

    // ---------------------------------------------------------------------------------------
    // Leaves and elements
    // ---------------------------------------------------------------------------------------

    /// @notice keccak256 of one 256-byte leaf chunk.
    /// @param chunk The chunk; must be exactly 256 bytes.
    /// @return h The leaf hash.
    function leafHash(bytes memory chunk) internal pure returns (bytes32 h) {
        if (chunk.length != LEAF_BYTES) revert BadChunkLength(chunk.length);
        assembly ("memory-safe") {
            h := keccak256(add(chunk, 32), 256) // the 256 data bytes after the length word
        }
    }

    /// @notice The 32-bit element at `position` (0..63) of a chunk, read big-endian.
    /// @param chunk A chunk of at least 4·(position + 1) bytes (normally 256).
    /// @param position The element's position inside the chunk (element index mod 64).
    /// @return v The element's bits.
    function elementAt(bytes memory chunk, uint256 position) internal pure returns (uint32 v) {
        if (position >= LEAF_ELEMS) revert PositionOutOfRange(position, LEAF_ELEMS);
        if (chunk.length < 4 * position + 4) revert BadChunkLength(chunk.length);
        assembly ("memory-safe") {
            // the word starting at byte 4·position of the data; its top 4 bytes are the element
            v := shr(224, mload(add(add(chunk, 32), shl(2, position))))
        }
    }

    /// @notice Number of leaves of a tensor with `numel` elements: ceil(numel / 64).
    /// @param numel Element count.
    /// @return The leaf count.
    function leafCount(uint256 numel) internal pure returns (uint256) {
        return numel / LEAF_ELEMS + (numel % LEAF_ELEMS == 0 ? 0 : 1);
    }

    /// @notice Tree depth for `nLeaves` leaves: ceil(log2 nLeaves), 0 for one leaf.
    /// @param nLeaves Leaf count (> 0).
    /// @return d The depth.
    function depthFor(uint256 nLeaves) internal pure returns (uint256 d) {
        // loop runs at most 256 times: 2^d doubles until it reaches nLeaves
        while (d < 256 && (uint256(1) << d) < nLeaves) ++d;
    }

    /// @notice keccak256(left ‖ right).
    /// @param left Left child.
    /// @param right Right child.
    /// @return h The parent node.
    function hashPair(bytes32 left, bytes32 right) internal pure returns (bytes32 h) {
        assembly ("memory-safe") {
            mstore(0x00, left) // scratch space 0x00..0x3f is free for hashing
            mstore(0x20, right)
            h := keccak256(0x00, 0x40)
        }
    }

    /// @notice Root of a fixed-depth tree from a leaf, its index and its siblings (bottom-up):
    ///         at level l the sibling is on the left iff bit l of the index is 1.
    /// @dev Bits of `index` above the depth are ignored by the path; callers bound the index.
    /// @param leaf The leaf hash.
    /// @param index The leaf's index.
    /// @param siblings The sibling hashes, bottom-up; the depth is their count.
    /// @return h The root.
    function rootFromPath(bytes32 leaf, uint256 index, bytes32[] memory siblings)
        internal
        pure
        returns (bytes32 h)
    {
        h = leaf;
        uint256 n = siblings.length;
        for (uint256 l = 0; l < n; ++l) {
            h = (index >> l) & 1 == 1 ? hashPair(siblings[l], h) : hashPair(h, siblings[l]);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Tensors
    // ---------------------------------------------------------------------------------------

    /// @notice keccak256(abi.encode(TENSOR_DOMAIN, dtype, rows, cols, dataRoot)).
    /// @param dtype 1 = float32, 2 = uint32.
    /// @param rows Row count.
    /// @param cols Column count.
    /// @param dataRoot Merkle root of the element data.
    /// @return The tensor root.
    function tensorRoot(uint256 dtype, uint256 rows, uint256 cols, bytes32 dataRoot)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(TENSOR_DOMAIN, dtype, rows, cols, dataRoot));
    }

    /// @notice Verifies that `chunk` is leaf `leafIndex` of the data tree of a tensor with
    ///         `numel` elements and data root `dataRoot`.
    /// @param dataRoot The expected data root.
    /// @param numel The tensor's element count (fixes the depth).
    /// @param leafIndex The leaf's index.
    /// @param chunk The 256-byte leaf chunk.
    /// @param siblings Sibling hashes, bottom-up.
    /// @return Whether the proof is valid.
    function verifyLeaf(
        bytes32 dataRoot,
        uint256 numel,
        uint256 leafIndex,
        bytes memory chunk,
        bytes32[] memory siblings
    ) internal pure returns (bool) {
        if (numel == 0) revert EmptyCommitment();
        uint256 nLeaves = leafCount(numel);
        if (leafIndex >= nLeaves || siblings.length != depthFor(nLeaves)) return false;
        return rootFromPath(leafHash(chunk), leafIndex, siblings) == dataRoot;
    }

    /// @notice Verifies an element proof against a tensor root and returns the element.
    /// @param root The tensor root.
    /// @param dtype The tensor's dtype code.
    /// @param rows Row count.
    /// @param cols Column count.
    /// @param element Row-major element index (row·cols + col).
    /// @param chunk The 256-byte chunk of leaf element / 64.
    /// @param siblings Sibling hashes, bottom-up.
    /// @return ok Whether the proof is valid.
    /// @return value The element's 32-bit word (meaningful only if ok).
    function verifyElement(
        bytes32 root,
        uint256 dtype,
        uint256 rows,
        uint256 cols,
        uint256 element,
        bytes memory chunk,
        bytes32[] memory siblings
    ) internal pure returns (bool ok, uint32 value) {
        uint256 numel = rows * cols; // checked: reverts on an absurd shape
        if (numel == 0) revert EmptyCommitment();
        if (element >= numel) revert PositionOutOfRange(element, numel);
        uint256 nLeaves = leafCount(numel);
        if (siblings.length != depthFor(nLeaves)) return (false, 0);
        bytes32 dataRoot = rootFromPath(leafHash(chunk), element / LEAF_ELEMS, siblings);
        ok = tensorRoot(dtype, rows, cols, dataRoot) == root;
        value = elementAt(chunk, element % LEAF_ELEMS);
    }

    /// @notice Data root from a range proof of consecutive leaves (agents RangeProof format):
    ///         per level bottom-up, the left neighbour of the covered interval is consumed first
    ///         if the interval starts at a right child, then the right neighbour if it ends at
    ///         a left child.
    /// @param firstLeaf Index of the first covered leaf.
    /// @param chunks The covered leaves' chunks, concatenated (a positive multiple of 256 bytes).
    /// @param siblings The neighbour hashes in the order above.
    /// @param depth The tree depth.
    /// @return ok False if the siblings run out or are left over.
    /// @return root The recomputed root (meaningful only if ok).
    function rangeRoot(
        uint256 firstLeaf,
        bytes memory chunks,
        bytes32[] memory siblings,
        uint256 depth
    ) internal pure returns (bool ok, bytes32 root) {
        uint256 len = chunks.length / LEAF_BYTES;
        if (len == 0 || chunks.length % LEAF_BYTES != 0) revert BadChunkLength(chunks.length);
        // cur[1 .. len] holds the current level's interval; cur[0] and cur[len + 1] take the
        // left / right neighbour. Pairs are written back from cur[1] upward, never over an
        // entry not yet read (write index 1 + i <= read index start + 2i for i >= 1).
        bytes32[] memory cur = new bytes32[](len + 2);
        for (uint256 i = 0; i < len; ++i) {
            bytes32 h;
            assembly ("memory-safe") {
                h := keccak256(add(add(chunks, 32), mul(i, 256)), 256) // chunk i
            }
            cur[1 + i] = h;
        }
        uint256 lo = firstLeaf;
        uint256 hi = firstLeaf + len - 1;
        uint256 k = 0;
        uint256 ns = siblings.length;
        for (uint256 level = 0; level < depth; ++level) {
            uint256 start = 1;
            uint256 end = 1 + len;
            if (lo & 1 == 1) {
                if (k == ns) return (false, bytes32(0));
                cur[0] = siblings[k++];
                start = 0;
            }
            if (hi & 1 == 0) {
                if (k == ns) return (false, bytes32(0));
                cur[end] = siblings[k++];
                ++end;
            }
            len = (end - start) / 2; // end - start is even after the neighbours are added
            for (uint256 i = 0; i < len; ++i) {
                cur[1 + i] = hashPair(cur[start + 2 * i], cur[start + 2 * i + 1]);
            }
            lo >>= 1;
            hi >>= 1;
        }
        if (k != ns || len != 1) return (false, bytes32(0));
        return (true, cur[1]);
    }

    /// @notice Verifies a range proof of consecutive leaves against a tensor root.
    /// @param root The tensor root.
    /// @param dtype The tensor's dtype code.
    /// @param rows Row count.
    /// @param cols Column count.
    /// @param firstLeaf Index of the first covered leaf.
    /// @param chunks The covered chunks, concatenated.
    /// @param siblings Neighbour hashes (see rangeRoot).
    /// @return Whether the proof is valid.
    function verifyRange(
        bytes32 root,
        uint256 dtype,
        uint256 rows,
        uint256 cols,
        uint256 firstLeaf,
        bytes memory chunks,
        bytes32[] memory siblings
    ) internal pure returns (bool) {
        uint256 numel = rows * cols;
        if (numel == 0) revert EmptyCommitment();
        uint256 nLeaves = leafCount(numel);
        uint256 count = chunks.length / LEAF_BYTES;
        if (firstLeaf >= nLeaves || count > nLeaves - firstLeaf) return false;
        (bool ok, bytes32 dataRoot) = rangeRoot(firstLeaf, chunks, siblings, depthFor(nLeaves));
        return ok && tensorRoot(dtype, rows, cols, dataRoot) == root;
    }

    // ---------------------------------------------------------------------------------------
    // Root lists (state, checkpoints, op trace, dataset)
    // ---------------------------------------------------------------------------------------

    /// @notice Leaf of a root list: keccak256(abi.encode(domain, index, value)).
    /// @param domain The list's domain tag.
    /// @param index The entry's index.
    /// @param value The entry's value.
    /// @return The leaf hash.
    function listLeaf(bytes32 domain, uint256 index, bytes32 value)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(domain, index, value));
    }

    /// @notice Commitment of a root list: keccak256(abi.encode(domain, n, treeRoot)).
    /// @param domain The list's domain tag.
    /// @param n The number of values.
    /// @param treeRoot Root of the padded tree of list leaves.
    /// @return The list root.
    function listRoot(bytes32 domain, uint256 n, bytes32 treeRoot) internal pure returns (bytes32) {
        return keccak256(abi.encode(domain, n, treeRoot));
    }

    /// @notice Verifies that `value` is entry `index` of the n-value root list `root`.
    /// @param root The list root.
    /// @param domain The list's domain tag.
    /// @param n The number of values.
    /// @param index The entry's index.
    /// @param value The entry's value.
    /// @param siblings Sibling hashes, bottom-up (depth = ceil(log2 n)).
    /// @return Whether the proof is valid.
    function verifyListEntry(
        bytes32 root,
        bytes32 domain,
        uint256 n,
        uint256 index,
        bytes32 value,
        bytes32[] memory siblings
    ) internal pure returns (bool) {
        if (n == 0) revert EmptyCommitment();
        if (index >= n || siblings.length != depthFor(n)) return false;
        bytes32 treeRoot = rootFromPath(listLeaf(domain, index, value), index, siblings);
        return listRoot(domain, n, treeRoot) == root;
    }

    /// @notice Root of the padded tree over the given leaves (bytes32(0) padding to 2^d).
    /// @dev For short lists computed on chain (e.g. the dataset's two tensor roots).
    /// @param leaves The leaf hashes (at least one).
    /// @return The tree root.
    function treeRoot(bytes32[] memory leaves) internal pure returns (bytes32) {
        uint256 n = leaves.length;
        if (n == 0) revert EmptyCommitment();
        uint256 width = uint256(1) << depthFor(n);
        bytes32[] memory level = new bytes32[](width); // zero-initialised padding
        for (uint256 i = 0; i < n; ++i) {
            level[i] = leaves[i];
        }
        while (width > 1) {
            width >>= 1;
            for (uint256 i = 0; i < width; ++i) {
                level[i] = hashPair(level[2 * i], level[2 * i + 1]);
            }
        }
        return level[0];
    }

    /// @notice Full root-list commitment of the given values under `domain`.
    /// @param domain The list's domain tag.
    /// @param values The values in order (at least one).
    /// @return The list root.
    function listRootOf(bytes32 domain, bytes32[] memory values) internal pure returns (bytes32) {
        uint256 n = values.length;
        bytes32[] memory leaves = new bytes32[](n);
        for (uint256 i = 0; i < n; ++i) {
            leaves[i] = listLeaf(domain, i, values[i]);
        }
        return listRoot(domain, n, treeRoot(leaves));
    }

    /// @notice A state-list value: keccak256(abi.encode(keccak256(bytes(name)), tensorRoot)).
    /// @param name The tensor's name.
    /// @param root The tensor root.
    /// @return The state entry.
    function stateEntry(string memory name, bytes32 root) internal pure returns (bytes32) {
        return keccak256(abi.encode(keccak256(bytes(name)), root));
    }

    /// @notice The dataset commitment: the root list under DATASET_DOMAIN of [X root, Y root].
    /// @param featuresRoot Tensor root of X (float32, N × F).
    /// @param labelsRoot Tensor root of Y (uint32, 1 × N).
    /// @return The dataset root.
    function datasetRoot(bytes32 featuresRoot, bytes32 labelsRoot) internal pure returns (bytes32) {
        bytes32 tree = hashPair(
            listLeaf(DATASET_DOMAIN, 0, featuresRoot), listLeaf(DATASET_DOMAIN, 1, labelsRoot)
        );
        return listRoot(DATASET_DOMAIN, 2, tree);
    }
}
