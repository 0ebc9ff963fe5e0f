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

    uint8 internal constant KIND_STATE = 1;
    uint8 internal constant KIND_NODE = 2;
    uint8 internal constant KIND_DATA_X = 3;
    uint8 internal constant KIND_DATA_Y = 4;
    uint8 internal constant KIND_BATCH = 5;
}
