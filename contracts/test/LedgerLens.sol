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
    ///         node, escrow of each job, bond of each unit (its open dispute's plus its open data
    ///         request's: a unit has one at most), credit of each account, jackpot].
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
            out[k++] = uint256(manager.getDispute(unitIds[i]).bond) + manager.dataRequestOf(unitIds[i]).bond;
        }
        for (uint256 i = 0; i < accounts.length; ++i) {
            out[k++] = manager.credits(accounts[i]);
        }
        out[k] = manager.jackpot();
    }

    /// @notice `role`'s pool in one flat array: [poolSize, deadPoolEntries, then for each entry
    ///         in index order: node (as a number), addedBlock, joinedBlock, live (1 or 0), the
    ///         node's poolSlot].
    function readPool(INodeRegistry registry, INodeRegistry.Role role) external view returns (uint256[] memory out) {
        uint256 size = registry.poolSize(role);
        out = new uint256[](2 + 5 * size);
        out[0] = size;
        out[1] = registry.deadPoolEntries(role);
        for (uint256 i = 0; i < size; ++i) {
            (INodeRegistry.PoolEntry memory entry, bool live) = registry.poolAt(role, i);
            out[2 + 5 * i] = uint160(entry.node);
            out[3 + 5 * i] = entry.addedBlock;
            out[4 + 5 * i] = entry.joinedBlock;
            out[5 + 5 * i] = live ? 1 : 0;
            out[6 + 5 * i] = registry.getNode(entry.node).poolSlot;
        }
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
            (,,, uint96 bond,,) = court.cases(gameIds[i]);
            out[k++] = bond;
        }
        for (uint256 i = 0; i < accounts.length; ++i) {
            out[k++] = court.credits(accounts[i]);
        }
    }
}
