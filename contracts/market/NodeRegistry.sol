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

    /// @dev Declared bandwidth bounds (PROTOCOL §6.2): 1 Mbit/s to 1 Tbit/s.
    uint32 public constant MIN_BANDWIDTH_MBPS = 1;
    uint32 public constant MAX_BANDWIDTH_MBPS = 1_000_000;

    /// @dev A node as stored: what eligibility reads in one slot (role, capability, heartbeat,
    ///      pool entry), what a duty moves and the weight reads in another (stake, locked, track
    ///      record), unbonding in a third. `Node` (the view) widens it. Stakes fit 96 bits (SafeCast
    ///      reverts past 2^96 - 1 base units, about 7.9e10 tokens of 18 decimals); the track record
    ///      saturates (completed at 2^24 - 1, failed and slashed at 2^16 - 1) rather than revert
    ///      a settlement.
    struct NodeRecord {
        Role role;
        uint16 deviceClass;
        uint32 memoryMiB;
        uint32 throughput;
        uint64 lastHeartbeat;
        uint32 poolSlot;
        // Network capability (setNetwork): 232 bits so far, the slot eligibility reads.
        uint32 bandwidthMbps;
        uint16 zone;
        uint96 stake;
        uint96 locked;
        uint24 completed;
        uint16 failed;
        uint16 slashed;
        // role == Role.None, kept beside the stake so that a release reads one slot
        bool roleless;
        uint128 unbonding;
        uint64 unbondReadyAt;
    }

    bool private _slashersSet;
    mapping(address account => bool) private _isSlasher;
    mapping(address node => NodeRecord) private _nodes;
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
        NodeRecord storage node = _nodes[msg.sender];
        if (node.role != Role.None) revert AlreadyRegistered(msg.sender, node.role);
        if (amount < minStake(role)) revert StakeBelowMinimum(amount, minStake(role));
        if (amount == 0) revert ZeroAmount();
        node.role = role;
        node.roleless = false;
        node.deviceClass = capability.deviceClass;
        node.memoryMiB = capability.memoryMiB;
        node.throughput = capability.throughput;
        node.lastHeartbeat = uint64(block.timestamp);
        // Added, not set: a node with no role may still hold stake the court recalled from its
        // unbonding (lockAnswerable), locked until the case ends.
        uint256 stake = node.stake + amount;
        node.stake = stake.toUint96();
        node.poolSlot = _joinPool(role, msg.sender);
        emit NodeRegistered(msg.sender, role, amount, capability);
        _token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @inheritdoc INodeRegistry
    function addStake(uint256 amount) external nonReentrant {
        NodeRecord storage node = _registered(msg.sender);
        if (amount == 0) revert ZeroAmount();
        uint256 stake = node.stake + amount;
        node.stake = stake.toUint96();
        emit StakeAdded(msg.sender, amount, stake);
        _token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @inheritdoc INodeRegistry
    function setCapability(Capability calldata capability) external {
        NodeRecord storage node = _registered(msg.sender);
        node.deviceClass = capability.deviceClass;
        node.memoryMiB = capability.memoryMiB;
        node.throughput = capability.throughput;
        emit CapabilityUpdated(msg.sender, capability);
    }

    /// @inheritdoc INodeRegistry
    function setNetwork(Network calldata network) external {
        NodeRecord storage node = _registered(msg.sender);
        uint32 bandwidth = network.bandwidthMbps;
        uint16 zone = network.zone;
        if (bandwidth < MIN_BANDWIDTH_MBPS || bandwidth > MAX_BANDWIDTH_MBPS) {
            revert BandwidthOutOfRange(bandwidth, MIN_BANDWIDTH_MBPS, MAX_BANDWIDTH_MBPS);
        }
        if (zone & 0xff == 0) revert ZoneOutOfRange(zone);
        node.bandwidthMbps = bandwidth;
        node.zone = zone;
        emit NetworkDeclared(msg.sender, bandwidth, zone);
    }

    /// @inheritdoc INodeRegistry
    function heartbeat() external {
        NodeRecord storage node = _registered(msg.sender);
        node.lastHeartbeat = uint64(block.timestamp);
        emit HeartbeatRecorded(msg.sender, uint64(block.timestamp));
    }

    /// @inheritdoc INodeRegistry
    function requestUnbond(uint256 amount) external {
        NodeRecord storage node = _registered(msg.sender);
        if (amount == 0) revert ZeroAmount();
        uint256 free = node.stake - node.locked;
        if (amount > free) revert InsufficientFreeStake(msg.sender, free, amount);
        uint256 left = node.stake - amount;
        Role role = node.role;
        if (left != 0 && left < minStake(role)) revert StakeBelowMinimum(left, minStake(role));
        uint256 unbonding = node.unbonding + amount;
        uint64 readyAt = uint64(block.timestamp) + _unbondingDelay;
        // left <= stake, so it fits the uint96 the stake came from.
        node.stake = uint96(left);
        node.unbonding = unbonding.toUint128();
        node.unbondReadyAt = readyAt;
        emit UnbondRequested(msg.sender, amount, unbonding, readyAt);
        if (left == 0) {
            _leavePool(node);
            node.role = Role.None;
            node.roleless = true;
            emit NodeExited(msg.sender, role);
        }
    }

    /// @inheritdoc INodeRegistry
    function withdrawUnbonded() external nonReentrant {
        NodeRecord storage node = _nodes[msg.sender];
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
        NodeRecord storage node = _nodes[nodeAddr];
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
        NodeRecord storage node = _nodes[nodeAddr];
        uint256 free = node.stake - node.locked;
        uint256 unbonding = node.unbonding;
        if (free + unbonding < amount) revert InsufficientAnswerableStake(nodeAddr, free + unbonding, amount);
        if (free < amount) {
            // The shortfall comes back from unbonding: amount - free <= unbonding (checked
            // above), which came from a uint128; the stake it joins is checked to fit 96 bits.
            uint256 recalled = amount - free;
            unbonding -= recalled;
            node.unbonding = uint128(unbonding);
            uint256 stake = node.stake + recalled;
            node.stake = stake.toUint96();
            emit UnbondingRecalled(nodeAddr, msg.sender, recalled, unbonding);
        }
        _lock(nodeAddr, node, amount);
    }

    /// @inheritdoc INodeRegistry
    function release(address nodeAddr, uint256 amount, bool completed) external onlySlasher {
        _release(nodeAddr, _nodes[nodeAddr], amount, completed);
    }

    /// @inheritdoc INodeRegistry
    function slash(address nodeAddr, uint256 amount, bool failed) external onlySlasher nonReentrant {
        _slash(nodeAddr, _nodes[nodeAddr], amount, failed);
        _token.safeTransfer(msg.sender, amount);
    }

    /// @inheritdoc INodeRegistry
    function lockAll(address[] calldata nodes, uint256 amount) external onlySlasher {
        for (uint256 i = 0; i < nodes.length; ++i) {
            _lock(nodes[i], _nodes[nodes[i]], amount);
        }
    }

    /// @inheritdoc INodeRegistry
    function settleUnit(
        address solver,
        uint256 collateral,
        address[] calldata verifiers,
        uint256 lockAmount,
        uint256 slashMask
    ) external onlySlasher {
        _release(solver, _nodes[solver], collateral, true);
        uint256 slashed = 0;
        for (uint256 i = 0; i < verifiers.length; ++i) {
            address v = verifiers[i];
            if (slashMask & (1 << i) != 0) {
                _slash(v, _nodes[v], lockAmount, true);
                slashed += lockAmount;
            } else {
                _release(v, _nodes[v], lockAmount, false);
            }
        }
        // One transfer for every slashed lock (each NodeSlashed says whose), after every state
        // change: the caller is a protocol contract and the token is fixed at deployment, so
        // nothing is left for a reentrant call to see half done (no guard needed).
        if (slashed != 0) _token.safeTransfer(msg.sender, slashed);
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
        NodeRecord storage n = _nodes[nodeAddr];
        return Node({
            role: n.role,
            deviceClass: n.deviceClass,
            memoryMiB: n.memoryMiB,
            throughput: n.throughput,
            lastHeartbeat: n.lastHeartbeat,
            completed: n.completed,
            failed: n.failed,
            slashed: n.slashed,
            stake: n.stake,
            locked: n.locked,
            unbonding: n.unbonding,
            unbondReadyAt: n.unbondReadyAt,
            poolSlot: n.poolSlot,
            bandwidthMbps: n.bandwidthMbps,
            zone: n.zone
        });
    }

    /// @inheritdoc INodeRegistry
    function roleOf(address nodeAddr) external view returns (Role) {
        return _nodes[nodeAddr].role;
    }

    /// @inheritdoc INodeRegistry
    function freeStake(address nodeAddr) external view returns (uint256) {
        NodeRecord storage node = _nodes[nodeAddr];
        return node.stake - node.locked;
    }

    /// @inheritdoc INodeRegistry
    function answerableStake(address nodeAddr) external view returns (uint256) {
        NodeRecord storage node = _nodes[nodeAddr];
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
        address candidate = _eligibleAt(pool, randomWord % size, joinedBefore, amount);
        for (uint256 i = 0; i < exclude.length; ++i) {
            if (candidate == exclude[i]) return address(0);
        }
        return candidate;
    }

    /// @inheritdoc INodeRegistry
    function pickPoolMembers(
        Role role,
        bytes32 seed,
        uint256 wanted,
        uint256 tries,
        uint64 joinedBefore,
        address exclude,
        uint256 amount
    ) external view returns (address[] memory picked) {
        PoolEntry[] storage pool = _pools[role];
        uint256 size = _sizeBefore(pool, joinedBefore);
        picked = new address[](wanted);
        uint256 count = 0;
        for (uint256 t = 0; t < tries && count < wanted && size != 0; ++t) {
            uint256 word = uint256(keccak256(abi.encode(seed, t)));
            count = _take(pool, word % size, joinedBefore, amount, exclude, picked, count);
        }
        // A pool of at most `tries` entries is walked once more from a drawn start when the
        // random tries left a seat empty: with replacement, two eligible nodes fill two seats in
        // eight tries only 127 times in 128, and a small pool is where an empty seat lets a
        // lazy verifier attest alone. A larger pool keeps its random tries alone: a walk over it
        // would not be bounded by `tries` (PROTOCOL §6.5).
        if (count < wanted && size != 0 && size <= tries) {
            uint256 start = uint256(keccak256(abi.encode(seed, tries))) % size;
            for (uint256 i = 0; i < size && count < wanted; ++i) {
                count = _take(pool, (start + i) % size, joinedBefore, amount, exclude, picked, count);
            }
        }
        // Shrink the array to what was picked: count <= wanted, its allocated length.
        assembly ("memory-safe") {
            mstore(picked, count)
        }
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

    function _registered(address nodeAddr) private view returns (NodeRecord storage node) {
        node = _nodes[nodeAddr];
        if (node.role == Role.None) revert NotRegistered(nodeAddr);
    }

    function _online(NodeRecord storage node) private view returns (bool) {
        return node.role != Role.None && block.timestamp <= uint256(node.lastHeartbeat) + _heartbeatTtl;
    }

    function _lock(address nodeAddr, NodeRecord storage node, uint256 amount) private {
        uint256 free = node.stake - node.locked;
        if (free < amount) revert InsufficientFreeStake(nodeAddr, free, amount);
        // amount <= free <= stake - locked, so locked + amount <= stake fits uint96.
        node.locked += uint96(amount);
        emit StakeLocked(nodeAddr, msg.sender, amount);
    }

    function _release(address nodeAddr, NodeRecord storage node, uint256 amount, bool completed) private {
        uint256 locked = node.locked;
        if (locked < amount) revert InsufficientLockedStake(nodeAddr, locked, amount);
        // amount <= locked (checked above), so the cast is exact.
        node.locked = uint96(locked - amount);
        // Saturates: a track record at its maximum must not block a settlement.
        if (completed && node.completed != type(uint24).max) ++node.completed;
        emit StakeReleased(nodeAddr, msg.sender, amount, completed);
        if (node.roleless) {
            // Only lockAnswerable locks a node with no role (exiting needs locked == 0): the stake
            // it recalled goes back to unbonding, the one way out of a node with no role.
            // amount <= locked <= stake, and unbonding + amount <= the uint128 it came from plus
            // a uint96.
            node.stake -= uint96(amount);
            uint256 unbonding = node.unbonding + amount;
            node.unbonding = unbonding.toUint128();
            emit StakeReturnedToUnbonding(nodeAddr, amount, unbonding);
        }
    }

    function _slash(address nodeAddr, NodeRecord storage node, uint256 amount, bool failed) private {
        uint256 locked = node.locked;
        if (locked < amount) revert InsufficientLockedStake(nodeAddr, locked, amount);
        // amount <= locked <= stake (checked above), so the casts are exact.
        node.locked = uint96(locked - amount);
        node.stake -= uint96(amount);
        // Saturates, as in _release.
        if (node.slashed != type(uint16).max) ++node.slashed;
        if (failed && node.failed != type(uint16).max) ++node.failed;
        // A node with no role (its stake recalled from unbonding) has no pool entry to leave.
        if (node.stake == 0 && node.role != Role.None) {
            Role role = node.role;
            _leavePool(node);
            node.role = Role.None;
            node.roleless = true;
            emit NodeExited(nodeAddr, role);
        }
        emit NodeSlashed(nodeAddr, msg.sender, amount, failed);
    }

    function _weight(NodeRecord storage node) private view returns (uint256) {
        uint256 good = uint256(node.completed) + 1;
        uint256 bad = 2 * uint256(node.failed) + 4 * uint256(node.slashed);
        return uint256(node.stake) * good / (good + bad);
    }

    /// @dev The node on pool entry `index` (of the `pool` entries added before `joinedBefore`) if
    ///      it took the entry before block `joinedBefore` (a node that took it later may have seen
    ///      the seed), is still on it, is online and has `amount` free stake; else address(0).
    function _eligibleAt(PoolEntry[] storage pool, uint256 index, uint64 joinedBefore, uint256 amount)
        private
        view
        returns (address)
    {
        PoolEntry storage entry = pool[index];
        if (entry.joinedBlock >= joinedBefore) return address(0);
        address candidate = entry.node;
        NodeRecord storage node = _nodes[candidate];
        if (!_onEntry(node, index)) return address(0);
        if (!_online(node)) return address(0);
        if (node.stake - node.locked < amount) return address(0);
        return candidate;
    }

    /// @dev One try of a draw: appends entry `index`'s node to `picked[0 .. count)` when it is
    ///      eligible, not `exclude` and not picked already; returns the new count.
    function _take(
        PoolEntry[] storage pool,
        uint256 index,
        uint64 joinedBefore,
        uint256 amount,
        address exclude,
        address[] memory picked,
        uint256 count
    ) private view returns (uint256) {
        address candidate = _eligibleAt(pool, index, joinedBefore, amount);
        if (candidate == address(0) || candidate == exclude) return count;
        if (_contains(picked, count, candidate)) return count;
        picked[count] = candidate;
        return count + 1;
    }

    /// @dev Whether `list[0 .. count)` holds `item`.
    function _contains(address[] memory list, uint256 count, address item) private pure returns (bool) {
        for (uint256 i = 0; i < count; ++i) {
            if (list[i] == item) return true;
        }
        return false;
    }

    /// @dev Whether `node` is still on pool entry `index` (the entry is live); false once the node
    ///      left the pool (`poolSlot` 0) or took another entry.
    function _onEntry(NodeRecord storage node, uint256 index) private view returns (bool) {
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
    function _leavePool(NodeRecord storage node) private {
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
