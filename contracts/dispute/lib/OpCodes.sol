// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title OpCodes — operator and operand codes of graph node descriptors (PROTOCOL §7.2)
/// @notice Shared by the one-step prover and `agents/dispute/graph.py` (same numbers).
library OpCodes {
    uint8 internal constant MATMUL_NT = 1;
    uint8 internal constant TRANSPOSE = 2;
    uint8 internal constant ADD = 3;
    uint8 internal constant SUB = 4;
    uint8 internal constant MUL = 5;
    uint8 internal constant DIV = 6;
    uint8 internal constant ADD_ROW = 7;
    uint8 internal constant SUB_COL = 8;
    uint8 internal constant DIV_COL = 9;
    uint8 internal constant RELU = 10;
    uint8 internal constant RELU_BWD = 11;
    uint8 internal constant ROW_SUM = 12;
    uint8 internal constant ROW_MAX = 13;
    uint8 internal constant EXP = 14;
    uint8 internal constant LOG = 15;
    uint8 internal constant GATHER_ROWS = 16;
    uint8 internal constant GATHER_LABELS = 17;
    uint8 internal constant XENT_GRAD = 18;
    uint8 internal constant NLL = 19;
    uint8 internal constant MEAN = 20;
    uint8 internal constant MOMENTUM = 21;
    uint8 internal constant SGD = 22;

    // Version-3 graph operators: agents/training/registry.py is their source and a test checks
    // these numbers against it. The GraphProver evaluates them.
    uint8 internal constant V3_ADD = 64;
    uint8 internal constant V3_SUB = 65;
    uint8 internal constant V3_MUL = 66;
    uint8 internal constant V3_DIV = 67;
    uint8 internal constant V3_MAXIMUM = 68;
    uint8 internal constant V3_MINIMUM = 69;
    uint8 internal constant V3_GT = 70;
    uint8 internal constant V3_GE = 71;
    uint8 internal constant V3_LT = 72;
    uint8 internal constant V3_LE = 73;
    uint8 internal constant V3_EQ = 74;
    uint8 internal constant V3_NE = 75;
    uint8 internal constant V3_WHERE = 76;
    uint8 internal constant V3_NEG = 80;
    uint8 internal constant V3_EXP = 81;
    uint8 internal constant V3_LOG = 82;
    uint8 internal constant V3_SQRT = 83;
    uint8 internal constant V3_RELU = 84;
    uint8 internal constant V3_TANH = 85;
    uint8 internal constant V3_ERF = 86;
    uint8 internal constant V3_CAST_F32 = 87;
    uint8 internal constant V3_CAST_I32 = 88;
    uint8 internal constant V3_LOGICAL_NOT = 89;
    uint8 internal constant V3_SUM_LAST = 96;
    uint8 internal constant V3_MAX_LAST = 97;
    uint8 internal constant V3_ARGMAX_LAST = 98;
    uint8 internal constant V3_MATMUL = 100;
    uint8 internal constant V3_CONST = 112;
    uint8 internal constant V3_RESHAPE = 113;
    uint8 internal constant V3_PERMUTE = 114;
    uint8 internal constant V3_EXPAND = 115;
    uint8 internal constant V3_SLICE = 116;
    uint8 internal constant V3_CAT = 117;
    uint8 internal constant V3_INDEX_ROWS = 121;
    uint8 internal constant V3_INDEX_ADD_ROWS = 122;
    uint8 internal constant V3_GATHER = 123;
    uint8 internal constant V3_SCATTER_VALUE = 124;
    uint8 internal constant V3_UNIFORM = 125;

    uint8 internal constant KIND_STATE = 1;
    uint8 internal constant KIND_NODE = 2;
    uint8 internal constant KIND_DATA_X = 3;
    uint8 internal constant KIND_DATA_Y = 4;
    uint8 internal constant KIND_BATCH = 5;
    // Version-3 operand kinds (TensorInput.kind, PROTOCOL §7.2).
    uint8 internal constant KIND_WORD = 6;
    uint8 internal constant KIND_BATCH_X = 7;
    uint8 internal constant KIND_BATCH_Y = 8;
    uint8 internal constant KIND_WINDOW_X = 9;
    uint8 internal constant KIND_WINDOW_Y = 10;
    uint8 internal constant KIND_CONST = 11;
    uint8 internal constant KIND_STEP = 12;
    // An aggregation graph's stack of the round's S unit states' tensor `index`: input shape
    // (S, numel), row s opened in unit s's final state, entry s of the claim's units list
    // (PROTOCOL §2.9, §7.2).
    uint8 internal constant KIND_UNITS = 13;

    // Element types of a committed tensor (§3): binary32 bits, or 32-bit words (i32 / uint32).
    uint8 internal constant DTYPE_F32 = 1;
    uint8 internal constant DTYPE_U32 = 2;

    /// @notice The first version-3 operator code: a descriptor whose op is at least this is a
    ///         `GraphNode`, evaluated by the GraphProver.
    uint8 internal constant FIRST_V3 = 64;
}
