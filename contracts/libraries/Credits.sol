// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title Credits
/// @notice The pull-payment ledger of the job manager, the round manager and the attestation
///         court: what each account is owed, paid out whole by its `withdraw` (PROTOCOL §6.7).
/// @dev A slot holds 0 for an account never credited, else 1 + what it is owed, and a withdrawal
///      leaves 1. So an operator's next credit updates a live slot (2,900 gas + the cold read)
///      instead of filling an empty one (20,000 + the cold read): every job credits its solver
///      and verifiers, and operators withdraw between jobs. The price is the 4,800-gas refund a
///      withdrawal no longer gets for clearing the slot.
library Credits {
    struct Ledger {
        mapping(address account => uint256) slots;
    }

    /// @notice What `account` is owed.
    function owed(Ledger storage ledger, address account) internal view returns (uint256) {
        return _owed(ledger.slots[account]);
    }

    /// @notice Adds `amount` to what `account` is owed; returns the new balance.
    function add(Ledger storage ledger, address account, uint256 amount) internal returns (uint256 balance) {
        balance = _owed(ledger.slots[account]) + amount;
        ledger.slots[account] = balance + 1;
    }

    /// @notice Sets what `account` is owed to zero; returns what it was.
    function take(Ledger storage ledger, address account) internal returns (uint256 amount) {
        amount = _owed(ledger.slots[account]);
        ledger.slots[account] = 1; // owed nothing; the slot stays live for the next credit
    }

    function _owed(uint256 slot) private pure returns (uint256) {
        // unchecked: the subtraction runs only when slot >= 1
        unchecked {
            return slot == 0 ? 0 : slot - 1;
        }
    }
}
