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
    /// @dev Entries never move (PROTOCOL §6.2): an index names the same entry forever, so a draw
    ///      against the pool as it stood before a seed block cannot be moved by later joins or exits.
    mapping(Role role => PoolEntry[]) private _pools;
    /// @dev Indices of dead entries, reused (last in, first out) by the next registrations.
    mapping(Role role => uint32[]) private _deadEntries;

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
        // Added, not set: a node with no role may still hold stake the court recalled from its
        // unbonding (lockAnswerable), locked until the case ends.
        node.stake = (node.stake + amount).toUint128();
        node.poolSlot = _joinPool(role, msg.sender);
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
    function lockAnswerable(address nodeAddr, uint256 amount) external onlySlasher {
        Node storage node = _nodes[nodeAddr];
        uint256 free = node.stake - node.locked;
        uint256 unbonding = node.unbonding;
        if (free + unbonding < amount) revert InsufficientAnswerableStake(nodeAddr, free + unbonding, amount);
        if (free < amount) {
            // The shortfall comes back from unbonding: amount - free <= unbonding (checked
            // above), and stake + that <= stake + unbonding, which both came from uint128s.
            uint256 recalled = amount - free;
            unbonding -= recalled;
            node.unbonding = uint128(unbonding);
            node.stake += uint128(recalled);
            emit UnbondingRecalled(nodeAddr, msg.sender, recalled, unbonding);
        }
        _lock(nodeAddr, node, amount);
    }

    /// @inheritdoc INodeRegistry
    function release(address nodeAddr, uint256 amount, bool completed) external onlySlasher {
        Node storage node = _nodes[nodeAddr];
        if (node.locked < amount) revert InsufficientLockedStake(nodeAddr, node.locked, amount);
        // amount <= locked (checked above), so the cast is exact.
        node.locked -= uint128(amount);
        if (completed) ++node.completed;
        emit StakeReleased(nodeAddr, msg.sender, amount, completed);
        if (node.role == Role.None) {
            // Only lockAnswerable locks a node with no role (exiting needs locked == 0): the stake
            // it recalled goes back to unbonding, the one way out of a node with no role.
            // amount <= locked <= stake, and unbonding + amount <= the uint128s they came from.
            node.stake -= uint128(amount);
            uint256 unbonding = node.unbonding + amount;
            node.unbonding = uint128(unbonding);
            emit StakeReturnedToUnbonding(nodeAddr, amount, unbonding);
        }
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
        // A node with no role (its stake recalled from unbonding) has no pool entry to leave.
        if (node.stake == 0 && node.role != Role.None) {
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
    function answerableStake(address nodeAddr) external view returns (uint256) {
        Node storage node = _nodes[nodeAddr];
        return node.stake - node.locked + node.unbonding;
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
    function poolSizeBefore(Role role, uint64 blockNumber) external view returns (uint256) {
        return _sizeBefore(_pools[role], blockNumber);
    }

    /// @inheritdoc INodeRegistry
    function pickPoolMember(
        Role role,
        uint256 randomWord,
        uint64 joinedBefore,
        address[] calldata exclude,
        uint256 amount
    ) external view returns (address) {
        PoolEntry[] storage pool = _pools[role];
        uint256 size = _sizeBefore(pool, joinedBefore);
        if (size == 0) return address(0);
        uint256 index = randomWord % size;
        PoolEntry storage entry = pool[index];
        address candidate = entry.node;
        // A node that took the entry in or after block `joinedBefore` may have seen the seed.
        if (entry.joinedBlock >= joinedBefore) return address(0);
        Node storage node = _nodes[candidate];
        if (!_onEntry(node, index)) return address(0);
        for (uint256 i = 0; i < exclude.length; ++i) {
            if (candidate == exclude[i]) return address(0);
        }
        if (!_online(node)) return address(0);
        if (node.stake - node.locked < amount) return address(0);
        return candidate;
    }

    /// @inheritdoc INodeRegistry
    function poolAt(Role role, uint256 index) external view returns (PoolEntry memory entry, bool live) {
        uint256 size = _pools[role].length;
        if (index >= size) revert NoSuchPoolEntry(role, index, size);
        entry = _pools[role][index];
        live = _onEntry(_nodes[entry.node], index);
    }

    /// @inheritdoc INodeRegistry
    function deadPoolEntries(Role role) external view returns (uint256) {
        return _deadEntries[role].length;
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

    /// @dev Whether `node` is still on pool entry `index` (the entry is live); false once the node
    ///      left the pool (`poolSlot` 0) or took another entry.
    function _onEntry(Node storage node, uint256 index) private view returns (bool) {
        return node.poolSlot == index + 1;
    }

    /// @dev Takes the most recently freed dead entry of `role`'s pool, else appends one; returns
    ///      its index + 1. A taken entry keeps its `addedBlock` (so `poolSizeBefore` never changes
    ///      for a past block) and gets a new `joinedBlock`, which keeps the node out of every draw
    ///      whose seed block is not later than its joining.
    function _joinPool(Role role, address nodeAddr) private returns (uint32 slot) {
        // Block numbers stay below 2^40 (about 10^12) for longer than any chain will run.
        uint40 now_ = uint40(block.number);
        uint32[] storage dead = _deadEntries[role];
        uint256 n = dead.length;
        if (n != 0) {
            uint32 index = dead[n - 1];
            dead.pop();
            PoolEntry storage entry = _pools[role][index];
            entry.node = nodeAddr;
            entry.joinedBlock = now_;
            // index < pool length <= 2^32 - 1 (entries are counted by toUint32 below).
            return index + 1;
        }
        _pools[role].push(PoolEntry(nodeAddr, now_, now_));
        return _pools[role].length.toUint32();
    }

    /// @dev Unlinks the node from its entry, which stays where it is, dead, until a registration
    ///      takes it. Moving another entry onto it (swap-and-pop) would let a node that has seen a
    ///      seed move a live entry onto or off a drawn index (PROTOCOL §6.5).
    function _leavePool(Node storage node) private {
        // poolSlot >= 1 while the node has a role: register set it, and only this clears it.
        _deadEntries[node.role].push(node.poolSlot - 1);
        node.poolSlot = 0;
    }

    /// @dev Number of entries added in blocks before `blockNumber`. Entries are added in block
    ///      order and never removed, so their `addedBlock`s are sorted and a binary search finds
    ///      the boundary; the common case (nothing added since) costs one read.
    function _sizeBefore(PoolEntry[] storage pool, uint64 blockNumber) private view returns (uint256) {
        uint256 high = pool.length;
        if (high == 0 || pool[high - 1].addedBlock < blockNumber) return high;
        uint256 low = 0;
        // Invariant: entries below `low` were added before `blockNumber`; entries at `high` and
        // above were not.
        while (low < high) {
            uint256 mid = (low + high) / 2;
            if (pool[mid].addedBlock < blockNumber) low = mid + 1;
            else high = mid;
        }
        return low;
    }
}
