// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {INodeRegistry} from "../interfaces/INodeRegistry.sol";
import {IJobManager} from "../interfaces/IJobManager.sol";
import {AttestationCourt} from "../market/AttestationCourt.sol";

/// @title LedgerLens
/// @notice Test-only batch reader: returns, in one call, the raw values the invariant tests sum.
/// @dev Computes no sums itself; it only forwards the protocol's views so that a property test
///      needs one `eth_call` per check instead of dozens.
contract LedgerLens {
    /// @notice One flat array: [registry balance, manager balance, (stake, unbonding) of each
    ///         node, escrow of each job, bond of each unit, credit of each account, jackpot].
    function read(
        INodeRegistry registry,
        IJobManager manager,
        address[] calldata nodes,
        uint256[] calldata jobIds,
        uint256[] calldata unitIds,
        address[] calldata accounts
    ) external view returns (uint256[] memory out) {
        out = new uint256[](3 + 2 * nodes.length + jobIds.length + unitIds.length + accounts.length);
        IERC20 token = IERC20(registry.token());
        out[0] = token.balanceOf(address(registry));
        out[1] = token.balanceOf(address(manager));
        uint256 k = 2;
        for (uint256 i = 0; i < nodes.length; ++i) {
            INodeRegistry.Node memory node = registry.getNode(nodes[i]);
            out[k++] = node.stake;
            out[k++] = node.unbonding;
        }
        for (uint256 i = 0; i < jobIds.length; ++i) {
            out[k++] = manager.getJob(jobIds[i]).escrow;
        }
        for (uint256 i = 0; i < unitIds.length; ++i) {
            out[k++] = manager.getDispute(unitIds[i]).bond;
        }
        for (uint256 i = 0; i < accounts.length; ++i) {
            out[k++] = manager.credits(accounts[i]);
        }
        out[k] = manager.jackpot();
    }

    /// @notice One flat array: [court balance, bond of each game id, credit of each account]
    ///         (the court keeps no jackpot: its share of a slash goes to the manager's).
    function readCourt(AttestationCourt court, uint256[] calldata gameIds, address[] calldata accounts)
        external
        view
        returns (uint256[] memory out)
    {
        out = new uint256[](1 + gameIds.length + accounts.length);
        out[0] = court.token().balanceOf(address(court));
        uint256 k = 1;
        for (uint256 i = 0; i < gameIds.length; ++i) {
            (,,, uint96 bond,) = court.cases(gameIds[i]);
            out[k++] = bond;
        }
        for (uint256 i = 0; i < accounts.length; ++i) {
            out[k++] = court.credits(accounts[i]);
        }
    }
}
