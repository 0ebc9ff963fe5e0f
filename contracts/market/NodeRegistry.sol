// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {INodeRegistry} from "../interfaces/INodeRegistry.sol";

/// @title NodeRegistry
/// @notice Stakes, roles, capabilities, heartbeats and track records (docs/PROTOCOL.md §6.2).
/// @dev Holds every staked and unbonding token. Token balance == Σ stake + Σ unbonding.
contract NodeRegistry is INodeRegistry, ReentrancyGuard {
    using SafeERC20 for IERC20;
    using SafeCast for uint256;

    IERC20 private immutable _token;
    address private immutable _deployer;
    uint128 private immutable _minSolverStake;
    uint128 private immutable _minVerifierStake;
    uint128 private immutable _minWhistleblowerStake;
    uint64 private immutable _unbondingDelay;
    uint64 private immutable _heartbeatTtl;

    bool private _slashersSet;
    mapping(address account => bool) private _isSlasher;
    mapping(address node => Node) private _nodes;
    mapping(Role role => address[]) private _pools;

    modifier onlySlasher() {
        if (!_isSlasher[msg.sender]) revert NotSlasher(msg.sender);
        _;
    }

    constructor(address token_, Config memory config) {
        if (token_ == address(0)) revert ZeroToken();
        _token = IERC20(token_);
        _deployer = msg.sender;
        _minSolverStake = config.minSolverStake;
        _minVerifierStake = config.minVerifierStake;
        _minWhistleblowerStake = config.minWhistleblowerStake;
        _unbondingDelay = config.unbondingDelay;
        _heartbeatTtl = config.heartbeatTtl;
    }

    // ------------------------------------------------------------------ wiring

    /// @inheritdoc INodeRegistry
    function setSlashers(address[] calldata slashers) external {
        if (msg.sender != _deployer) revert NotDeployer(msg.sender);
        if (_slashersSet) revert SlashersAlreadySet();
        _slashersSet = true;
        for (uint256 i = 0; i < slashers.length; ++i) {
            if (slashers[i] == address(0)) revert ZeroSlasher(i);
            _isSlasher[slashers[i]] = true;
        }
        emit SlashersSet(slashers);
    }

    // ------------------------------------------------------------------ nodes

    /// @inheritdoc INodeRegistry
    function register(Role role, Capability calldata capability, uint256 amount) external nonReentrant {
        if (role == Role.None) revert InvalidRole();
        Node storage node = _nodes[msg.sender];
        if (node.role != Role.None) revert AlreadyRegistered(msg.sender, node.role);
        if (amount < minStake(role)) revert StakeBelowMinimum(amount, minStake(role));
        if (amount == 0) revert ZeroAmount();
        node.role = role;
        node.deviceClass = capability.deviceClass;
        node.memoryMiB = capability.memoryMiB;
        node.throughput = capability.throughput;
        node.lastHeartbeat = uint64(block.timestamp);
        node.stake = amount.toUint128();
        _pools[role].push(msg.sender);
        node.poolSlot = _pools[role].length.toUint32();
        emit NodeRegistered(msg.sender, role, amount, capability);
        _token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @inheritdoc INodeRegistry
    function addStake(uint256 amount) external nonReentrant {
        Node storage node = _registered(msg.sender);
        if (amount == 0) revert ZeroAmount();
        uint256 stake = node.stake + amount;
        node.stake = stake.toUint128();
        emit StakeAdded(msg.sender, amount, stake);
        _token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @inheritdoc INodeRegistry
    function setCapability(Capability calldata capability) external {
        Node storage node = _registered(msg.sender);
        node.deviceClass = capability.deviceClass;
        node.memoryMiB = capability.memoryMiB;
        node.throughput = capability.throughput;
        emit CapabilityUpdated(msg.sender, capability);
    }

    /// @inheritdoc INodeRegistry
    function heartbeat() external {
        Node storage node = _registered(msg.sender);
        node.lastHeartbeat = uint64(block.timestamp);
        emit HeartbeatRecorded(msg.sender, uint64(block.timestamp));
    }

    /// @inheritdoc INodeRegistry
    function requestUnbond(uint256 amount) external {
        Node storage node = _registered(msg.sender);
        if (amount == 0) revert ZeroAmount();
        uint256 free = node.stake - node.locked;
        if (amount > free) revert InsufficientFreeStake(msg.sender, free, amount);
        uint256 left = node.stake - amount;
        Role role = node.role;
        if (left != 0 && left < minStake(role)) revert StakeBelowMinimum(left, minStake(role));
        uint256 unbonding = node.unbonding + amount;
        uint64 readyAt = uint64(block.timestamp) + _unbondingDelay;
        // left <= stake, so it fits the uint128 the stake came from.
        node.stake = uint128(left);
        node.unbonding = unbonding.toUint128();
        node.unbondReadyAt = readyAt;
        emit UnbondRequested(msg.sender, amount, unbonding, readyAt);
        if (left == 0) {
            _leavePool(node);
            node.role = Role.None;
            emit NodeExited(msg.sender, role);
        }
    }

    /// @inheritdoc INodeRegistry
    function withdrawUnbonded() external nonReentrant {
        Node storage node = _nodes[msg.sender];
        uint256 amount = node.unbonding;
        if (amount == 0) revert NothingUnbonding(msg.sender);
        if (block.timestamp < node.unbondReadyAt) {
            revert UnbondingNotReady(msg.sender, node.unbondReadyAt, uint64(block.timestamp));
        }
        node.unbonding = 0;
        node.unbondReadyAt = 0;
        emit UnbondWithdrawn(msg.sender, amount);
        _token.safeTransfer(msg.sender, amount);
    }

    // ------------------------------------------------------------------ protocol contracts only

    /// @inheritdoc INodeRegistry
    function lockEligible(address nodeAddr, Role role, Capability calldata required, uint256 amount)
        external
        onlySlasher
    {
        Node storage node = _nodes[nodeAddr];
        if (node.role != role) revert WrongRole(nodeAddr, role, node.role);
        if (!_online(node)) revert NodeOffline(nodeAddr, node.lastHeartbeat, _heartbeatTtl);
        if (
            node.deviceClass < required.deviceClass || node.memoryMiB < required.memoryMiB
                || node.throughput < required.throughput
        ) {
            revert CapabilityTooLow(
                nodeAddr, Capability(node.deviceClass, node.memoryMiB, node.throughput), required
            );
        }
        _lock(nodeAddr, node, amount);
    }

    /// @inheritdoc INodeRegistry
    function lock(address nodeAddr, uint256 amount) external onlySlasher {
        _lock(nodeAddr, _nodes[nodeAddr], amount);
    }

    /// @inheritdoc INodeRegistry
    function release(address nodeAddr, uint256 amount, bool completed) external onlySlasher {
        Node storage node = _nodes[nodeAddr];
        if (node.locked < amount) revert InsufficientLockedStake(nodeAddr, node.locked, amount);
        // amount <= locked (checked above), so the cast is exact.
        node.locked -= uint128(amount);
        if (completed) ++node.completed;
        emit StakeReleased(nodeAddr, msg.sender, amount, completed);
    }

    /// @inheritdoc INodeRegistry
    function slash(address nodeAddr, uint256 amount, bool failed) external onlySlasher nonReentrant {
        Node storage node = _nodes[nodeAddr];
        if (node.locked < amount) revert InsufficientLockedStake(nodeAddr, node.locked, amount);
        // amount <= locked <= stake (checked above), so the casts are exact.
        node.locked -= uint128(amount);
        node.stake -= uint128(amount);
        ++node.slashed;
        if (failed) ++node.failed;
        if (node.stake == 0) {
            Role role = node.role;
            _leavePool(node);
            node.role = Role.None;
            emit NodeExited(nodeAddr, role);
        }
        emit NodeSlashed(nodeAddr, msg.sender, amount, failed);
        _token.safeTransfer(msg.sender, amount);
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc INodeRegistry
    function token() external view returns (address) {
        return address(_token);
    }

    /// @inheritdoc INodeRegistry
    function isSlasher(address account) external view returns (bool) {
        return _isSlasher[account];
    }

    /// @inheritdoc INodeRegistry
    function getNode(address nodeAddr) external view returns (Node memory) {
        return _nodes[nodeAddr];
    }

    /// @inheritdoc INodeRegistry
    function roleOf(address nodeAddr) external view returns (Role) {
        return _nodes[nodeAddr].role;
    }

    /// @inheritdoc INodeRegistry
    function freeStake(address nodeAddr) external view returns (uint256) {
        Node storage node = _nodes[nodeAddr];
        return node.stake - node.locked;
    }

    /// @inheritdoc INodeRegistry
    function isOnline(address nodeAddr) external view returns (bool) {
        return _online(_nodes[nodeAddr]);
    }

    /// @inheritdoc INodeRegistry
    function minStake(Role role) public view returns (uint256) {
        if (role == Role.Solver) return _minSolverStake;
        if (role == Role.Verifier) return _minVerifierStake;
        if (role == Role.Whistleblower) return _minWhistleblowerStake;
        return 0;
    }

    /// @inheritdoc INodeRegistry
    function selectionWeight(address nodeAddr) external view returns (uint256) {
        return _weight(_nodes[nodeAddr]);
    }

    /// @inheritdoc INodeRegistry
    function poolSize(Role role) external view returns (uint256) {
        return _pools[role].length;
    }

    /// @inheritdoc INodeRegistry
    function pickPoolMember(Role role, uint256 randomWord, address[] calldata exclude, uint256 amount)
        external
        view
        returns (address)
    {
        uint256 size = _pools[role].length;
        if (size == 0) return address(0);
        address candidate = _pools[role][randomWord % size];
        for (uint256 i = 0; i < exclude.length; ++i) {
            if (candidate == exclude[i]) return address(0);
        }
        Node storage node = _nodes[candidate];
        if (!_online(node)) return address(0);
        if (node.stake - node.locked < amount) return address(0);
        return candidate;
    }

    /// @inheritdoc INodeRegistry
    function poolAt(Role role, uint256 index) external view returns (address) {
        return _pools[role][index];
    }

    /// @inheritdoc INodeRegistry
    function unbondingDelay() external view returns (uint64) {
        return _unbondingDelay;
    }

    /// @inheritdoc INodeRegistry
    function heartbeatTtl() external view returns (uint64) {
        return _heartbeatTtl;
    }

    // ------------------------------------------------------------------ internal

    function _registered(address nodeAddr) private view returns (Node storage node) {
        node = _nodes[nodeAddr];
        if (node.role == Role.None) revert NotRegistered(nodeAddr);
    }

    function _online(Node storage node) private view returns (bool) {
        return node.role != Role.None && block.timestamp <= uint256(node.lastHeartbeat) + _heartbeatTtl;
    }

    function _lock(address nodeAddr, Node storage node, uint256 amount) private {
        uint256 free = node.stake - node.locked;
        if (free < amount) revert InsufficientFreeStake(nodeAddr, free, amount);
        // amount <= free <= stake - locked, so locked + amount <= stake fits uint128.
        node.locked += uint128(amount);
        emit StakeLocked(nodeAddr, msg.sender, amount);
    }

    function _weight(Node storage node) private view returns (uint256) {
        uint256 good = uint256(node.completed) + 1;
        uint256 bad = 2 * uint256(node.failed) + 4 * uint256(node.slashed);
        return uint256(node.stake) * good / (good + bad);
    }

    /// @dev Swap-and-pop removal from the role pool; `poolSlot` is index + 1 (0 = not in a pool).
    function _leavePool(Node storage node) private {
        Role role = node.role;
        uint256 slot = node.poolSlot;
        uint256 last = _pools[role].length;
        if (slot != last) {
            address moved = _pools[role][last - 1];
            _pools[role][slot - 1] = moved;
            // slot <= last <= 2^32 - 1: slots were assigned with toUint32.
            _nodes[moved].poolSlot = uint32(slot);
        }
        _pools[role].pop();
        node.poolSlot = 0;
    }
}
