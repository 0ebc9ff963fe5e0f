// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title ITokenReceiver
/// @notice ERC-777-style receive hook of ReentrantToken.
interface ITokenReceiver {
    /// @notice Called by the token after `amount` was credited to the receiver.
    function onTokenReceived(address from, uint256 amount) external;
}

/// @title ReentrantToken
/// @notice Test-only ERC-20 with a transfer callback: after every transfer to an address that
///         opted in, it calls the receiver's `onTokenReceived`, handing it control in the middle
///         of the paying contract's call (the ERC-777 re-entry vector).
/// @dev Anyone can mint. Never deploy where the token has value.
contract ReentrantToken is ERC20 {
    /// @notice Addresses that asked for the receive hook.
    mapping(address account => bool hooked) public hooked;

    constructor() ERC20("Reentrant Test Token", "RTT") {}

    /// @notice Mints `amount` tokens to `to` (a faucet for tests).
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    /// @notice Turns the receive hook on or off for the caller.
    function setHook(bool on) external {
        hooked[msg.sender] = on;
    }

    /// @dev Moves the balance first, then hands control to an opted-in receiver; a revert in the
    ///      hook bubbles up (the receiver decides whether its re-entry attempt may fail quietly).
    function _update(address from, address to, uint256 value) internal override {
        super._update(from, to, value);
        if (from != address(0) && hooked[to]) {
            ITokenReceiver(to).onTokenReceived(from, value);
        }
    }
}

/// @title ReentrantAttacker
/// @notice Test-only contract account that acts through `exec` and, when paid by the token's
///         hook, tries once to re-enter a target with armed calldata (e.g. `withdraw()` again).
contract ReentrantAttacker is ITokenReceiver {
    /// @notice The contract the hook re-enters (zero: disarmed).
    address public target;
    /// @notice The calldata of the re-entry.
    bytes public reentry;
    /// @notice Re-entry attempts made.
    uint256 public attempts;
    /// @notice Whether the last re-entry call succeeded.
    bool public reentered;
    /// @notice Revert data of the last failed re-entry.
    bytes public lastError;

    /// @notice Arms the hook: on the next payment, call `target_` with `reentry_` once.
    function arm(address target_, bytes calldata reentry_) external {
        target = target_;
        reentry = reentry_;
        attempts = 0;
    }

    /// @notice Calls `to` with `data` as this contract; bubbles a revert.
    function exec(address to, bytes calldata data) external returns (bytes memory ret) {
        bool ok;
        // A generic account: it may call anything.
        // solhint-disable-next-line avoid-low-level-calls
        (ok, ret) = to.call(data);
        if (!ok) {
            assembly ("memory-safe") {
                revert(add(ret, 32), mload(ret))
            }
        }
    }

    /// @inheritdoc ITokenReceiver
    function onTokenReceived(address, uint256) external {
        if (target == address(0) || attempts > 0) return;
        ++attempts;
        // A failed re-entry is recorded, not bubbled: the attack must gain nothing even when
        // the outer payment goes through.
        // solhint-disable-next-line avoid-low-level-calls
        (bool ok, bytes memory ret) = target.call(reentry);
        reentered = ok;
        lastError = ret;
    }
}
