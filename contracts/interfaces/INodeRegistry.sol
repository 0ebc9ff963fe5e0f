// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title INodeRegistry
/// @notice Staking and node registry (docs/PROTOCOL.md §6.2): roles, stakes, capabilities,
///         heartbeats and track records of the protocol's nodes.
/// @dev A node has one role. Its stake is `free + locked`; locked stake backs a unit (solver
///      collateral) or a verification duty and can only be released or slashed by an authorised
///      protocol contract (the slasher set, fixed once at deployment by `setSlashers`). Unbonding
///      stake is neither free nor locked: it waits `unbondingDelay` seconds, then is withdrawable.
interface INodeRegistry {
    /// @notice The role a node plays. `None` marks an unregistered (or fully exited) address.
    enum Role {
        None,
        Solver,
        Verifier,
        Whistleblower
    }

    /// @notice Declared hardware capability. Each field is compared `>=` with a job's requirement.
    /// @param deviceClass Ordinal device tier (0 CPU, 1 consumer GPU, 2 datacentre GPU, ...).
    /// @param memoryMiB   Accelerator (or host) memory in MiB.
    /// @param throughput  Self-declared throughput score (training steps per hour of a reference
    ///                    job); used for eligibility only, never trusted for payment.
    struct Capability {
        uint16 deviceClass;
        uint32 memoryMiB;
        uint32 throughput;
    }

    /// @notice A node's full record (`getNode`). Stored narrower: stake and locked fit 96 bits
    ///         (SafeCast reverts above), and the track record saturates (completed at 2^24 - 1,
    ///         failed and slashed at 2^16 - 1) instead of reverting a settlement.
    struct Node {
        Role role;
        uint16 deviceClass;
        uint32 memoryMiB;
        uint32 throughput;
        uint64 lastHeartbeat;
        uint32 completed;
        uint32 failed;
        uint32 slashed;
        uint128 stake;
        uint128 locked;
        uint128 unbonding;
        uint64 unbondReadyAt;
        uint32 poolSlot;
        uint32 bandwidthMbps;
        uint16 zone;
    }

    /// @notice Declared network capability (PROTOCOL §6.2), read by pipeline placement (§6.5).
    /// @param bandwidthMbps The node's declared link bandwidth in Mbit/s, in
    ///                      [MIN_BANDWIDTH_MBPS, MAX_BANDWIDTH_MBPS]. 0 in a record: undeclared.
    /// @param zone          Network locality: `region << 8 | site`. Nodes of one zone are one
    ///                      site (low mutual latency); zones of one region are neighbours. Never 0
    ///                      once declared (0 in a record: undeclared); the site byte is not 0.
    struct Network {
        uint32 bandwidthMbps;
        uint16 zone;
    }

    /// @notice One entry of a role pool. Entries never move, so an index names the same entry
    ///         forever: `addedBlock` is the block the entry was appended in (it fixes which entries
    ///         a draw counts, `poolSizeBefore`), `joinedBlock` the block its current node took it.
    ///         An entry is live while its node still points at it; a dead entry is taken by the
    ///         next registration (PROTOCOL §6.2).
    struct PoolEntry {
        address node;
        uint40 addedBlock;
        uint40 joinedBlock;
    }

    /// @notice Deployment parameters.
    /// @param minSolverStake        Minimum stake of a solver.
    /// @param minVerifierStake      Minimum stake of a verifier.
    /// @param minWhistleblowerStake Minimum stake of a whistleblower.
    /// @param unbondingDelay        Seconds between an unbond request and its withdrawal.
    /// @param heartbeatTtl          Seconds a heartbeat keeps a node online.
    struct Config {
        uint128 minSolverStake;
        uint128 minVerifierStake;
        uint128 minWhistleblowerStake;
        uint64 unbondingDelay;
        uint64 heartbeatTtl;
    }

    // ------------------------------------------------------------------ errors
    /// @notice A zero address was given for the payment token.
    error ZeroToken();
    /// @notice `setSlashers` was called by an account other than the deployer.
    error NotDeployer(address caller);
    /// @notice `setSlashers` was already called.
    error SlashersAlreadySet();
    /// @notice A zero address was given in the slasher set.
    error ZeroSlasher(uint256 index);
    /// @notice The caller is not an authorised protocol contract.
    error NotSlasher(address caller);
    /// @notice `Role.None` was given where a role is required.
    error InvalidRole();
    /// @notice The account already has a role.
    error AlreadyRegistered(address node, Role role);
    /// @notice The account has no role.
    error NotRegistered(address node);
    /// @notice The account does not have the required role.
    error WrongRole(address node, Role required, Role actual);
    /// @notice The stake would fall below the role's minimum.
    error StakeBelowMinimum(uint256 stake, uint256 minimum);
    /// @notice A zero amount was given.
    error ZeroAmount();
    /// @notice The node's free stake does not cover `amount`.
    error InsufficientFreeStake(address node, uint256 free, uint256 amount);
    /// @notice The node's locked stake does not cover `amount`.
    error InsufficientLockedStake(address node, uint256 locked, uint256 amount);
    /// @notice `node`'s free plus unbonding stake, `answerable`, is less than `amount`.
    error InsufficientAnswerableStake(address node, uint256 answerable, uint256 amount);
    /// @notice The node's heartbeat is older than `heartbeatTtl`.
    error NodeOffline(address node, uint64 lastHeartbeat, uint64 ttl);
    /// @notice The node's declared capability is below the requirement.
    error CapabilityTooLow(address node, Capability declared, Capability required);
    /// @notice Nothing is unbonding for this node.
    error NothingUnbonding(address node);
    /// @notice The unbonding delay has not passed yet.
    error UnbondingNotReady(address node, uint64 readyAt, uint64 nowTs);
    /// @notice A declared bandwidth outside [`min`, `max`] Mbit/s.
    error BandwidthOutOfRange(uint32 bandwidthMbps, uint32 min, uint32 max);
    /// @notice A declared zone whose site byte (`zone & 0xff`) is 0: 0 marks no site.
    error ZoneOutOfRange(uint16 zone);
    /// @notice `role`'s pool has `size` entries; there is no entry `index`.
    error NoSuchPoolEntry(Role role, uint256 index, uint256 size);

    // ------------------------------------------------------------------ events
    /// @notice The slasher set was fixed.
    event SlashersSet(address[] slashers);
    /// @notice `node` registered as `role` with `stake` and a capability.
    event NodeRegistered(address indexed node, Role indexed role, uint256 stake, Capability capability);
    /// @notice `node` added `amount`; its stake is now `stake`.
    event StakeAdded(address indexed node, uint256 amount, uint256 stake);
    /// @notice `node` declared a new capability.
    event CapabilityUpdated(address indexed node, Capability capability);
    /// @notice `node` declared its network capability (bandwidth, zone).
    event NetworkDeclared(address indexed node, uint32 bandwidthMbps, uint16 zone);
    /// @notice `node` sent a heartbeat at `timestamp`.
    event HeartbeatRecorded(address indexed node, uint64 timestamp);
    /// @notice `node` started unbonding `amount` (total unbonding `unbonding`), ready at `readyAt`.
    event UnbondRequested(address indexed node, uint256 amount, uint256 unbonding, uint64 readyAt);
    /// @notice `node` left its role pool: its stake reached zero.
    event NodeExited(address indexed node, Role indexed role);
    /// @notice `node` withdrew `amount` of unbonded stake.
    event UnbondWithdrawn(address indexed node, uint256 amount);
    /// @notice `slasher` locked `amount` of `node`'s stake.
    event StakeLocked(address indexed node, address indexed slasher, uint256 amount);
    /// @notice `slasher` released `amount` of `node`'s locked stake; `completed` if it counted a
    ///         completed unit.
    event StakeReleased(address indexed node, address indexed slasher, uint256 amount, bool completed);
    /// @notice `slasher` slashed `amount` of `node`'s locked stake and received the tokens.
    event NodeSlashed(address indexed node, address indexed slasher, uint256 amount, bool failed);
    /// @notice `amount` of `node`'s unbonding stake went back into its stake, locked by `slasher`
    ///         for a past duty (`lockAnswerable`); `unbonding` is left.
    event UnbondingRecalled(address indexed node, address indexed slasher, uint256 amount, uint256 unbonding);
    /// @notice A node with no role got `amount` of released stake back as unbonding stake.
    event StakeReturnedToUnbonding(address indexed node, uint256 amount, uint256 unbonding);

    // ------------------------------------------------------------------ wiring
    /// @notice Fixes the authorised protocol contracts. Deployer only, once.
    function setSlashers(address[] calldata slashers) external;

    // ------------------------------------------------------------------ nodes
    /// @notice Registers the caller as `role`, pulling `amount` tokens as stake (needs approval).
    ///         The registration counts as a heartbeat.
    function register(Role role, Capability calldata capability, uint256 amount) external;

    /// @notice Adds `amount` tokens to the caller's stake.
    function addStake(uint256 amount) external;

    /// @notice Replaces the caller's declared capability.
    function setCapability(Capability calldata capability) external;

    /// @notice Replaces the caller's declared network capability (bandwidth, zone). Reverts
    ///         `BandwidthOutOfRange` or `ZoneOutOfRange` with the values given.
    function setNetwork(Network calldata network) external;

    /// @notice Marks the caller online for `heartbeatTtl` seconds.
    function heartbeat() external;

    /// @notice Moves `amount` of free stake to unbonding; restarts the unbonding clock. The stake
    ///         left must be zero (the node exits its role) or at least the role's minimum.
    function requestUnbond(uint256 amount) external;

    /// @notice Transfers the caller's unbonded stake once `unbondingDelay` has passed.
    function withdrawUnbonded() external;

    // ------------------------------------------------------------------ protocol contracts only
    /// @notice Checks `node` has `role`, is online, declares at least `required` and has `amount`
    ///         free stake, then locks `amount`. Reverts with the failing check's error.
    function lockEligible(address node, Role role, Capability calldata required, uint256 amount) external;

    /// @notice Locks `amount` of `node`'s free stake. Reverts `InsufficientFreeStake` if short.
    function lock(address node, uint256 amount) external;

    /// @notice Locks `amount` of each of `nodes`' free stake (one `StakeLocked` each). Reverts
    ///         `InsufficientFreeStake` for the first one short.
    function lockAll(address[] calldata nodes, uint256 amount) external;

    /// @notice Settles a unit in one call: releases the solver's `collateral` counting a completed
    ///         unit, and for each of `verifiers` slashes `lockAmount` (counting a failed unit) if
    ///         bit i of `slashMask` is set, else releases it; transfers the slashed total to the
    ///         caller (its own books already count it). Each node gets the event its `release` or
    ///         `slash` would emit.
    function settleUnit(
        address solver,
        uint256 collateral,
        address[] calldata verifiers,
        uint256 lockAmount,
        uint256 slashMask
    ) external;

    /// @notice Locks `amount` of what `node` still answers for: its free stake first, then its
    ///         unbonding stake, which is moved back into its stake, locked (`UnbondingRecalled`).
    ///         For duties already done (the attestation court, PROTOCOL §6.8): stake requested
    ///         for unbonding stays answerable for them until it is withdrawn. Reverts
    ///         `InsufficientAnswerableStake` if short.
    function lockAnswerable(address node, uint256 amount) external;

    /// @notice Releases `amount` of `node`'s locked stake; counts a completed unit if `completed`.
    ///         A node that has exited its role (`lockAnswerable` recalled its unbonding stake)
    ///         gets the amount back as unbonding stake, under its unchanged `unbondReadyAt`.
    function release(address node, uint256 amount, bool completed) external;

    /// @notice Slashes `amount` of `node`'s locked stake, transferring it to the caller; counts a
    ///         failed unit if `failed`.
    function slash(address node, uint256 amount, bool failed) external;

    // ------------------------------------------------------------------ views
    /// @notice The payment token.
    function token() external view returns (address);
    /// @notice Whether `account` is an authorised protocol contract.
    function isSlasher(address account) external view returns (bool);
    /// @notice The full record of `node`.
    function getNode(address node) external view returns (Node memory);
    /// @notice The role of `node`.
    function roleOf(address node) external view returns (Role);
    /// @notice Stake that is neither locked nor unbonding.
    function freeStake(address node) external view returns (uint256);
    /// @notice Free stake plus unbonding stake: what `lockAnswerable` can still lock.
    function answerableStake(address node) external view returns (uint256);
    /// @notice Whether `node`'s last heartbeat is at most `heartbeatTtl` seconds old.
    function isOnline(address node) external view returns (bool);
    /// @notice Minimum stake of `role`.
    function minStake(Role role) external view returns (uint256);
    /// @notice Selection weight: `stake * (completed + 1) / (completed + 1 + 2 failed + 4 slashed)`.
    function selectionWeight(address node) external view returns (uint256);
    /// @notice Pool entry `randomWord % poolSizeBefore(role, joinedBefore)` if its node took it in
    ///         a block before `joinedBefore`, is still on it (live), is online, not in `exclude`
    ///         and has `amount` free stake; address(0) otherwise (or if no entry was added before
    ///         block `joinedBefore`). Nodes that join in or after block `joinedBefore` can neither
    ///         be picked nor change which entry is (PROTOCOL §6.5).
    function pickPoolMember(
        Role role,
        uint256 randomWord,
        uint64 joinedBefore,
        address[] calldata exclude,
        uint256 amount
    ) external view returns (address node);
    /// @notice The draw of up to `wanted` distinct nodes of `role`'s pool: for t = 0, 1, … while
    ///         t < `tries` and fewer than `wanted` are picked, the node `pickPoolMember` gives for
    ///         `uint256(keccak256(abi.encode(seed, t)))`, unless it is `exclude` or picked already;
    ///         then, when seats are still empty and the pool has at most `tries` entries, entries
    ///         `(start + i) mod size` for i = 0 .. size − 1, start = `keccak256(abi.encode(seed,
    ///         tries))` mod size, the same way (PROTOCOL §6.5). In draw order; shorter when no
    ///         more nodes are eligible.
    function pickPoolMembers(
        Role role,
        bytes32 seed,
        uint256 wanted,
        uint256 tries,
        uint64 joinedBefore,
        address exclude,
        uint256 amount
    ) external view returns (address[] memory picked);
    /// @notice Number of entries of `role`'s pool, live or dead.
    function poolSize(Role role) external view returns (uint256);
    /// @notice Number of entries of `role`'s pool added in a block before `blockNumber`.
    function poolSizeBefore(Role role, uint64 blockNumber) external view returns (uint256);
    /// @notice Pool entry `index` of `role`, and whether it is live (its node has not left since).
    function poolAt(Role role, uint256 index) external view returns (PoolEntry memory entry, bool live);
    /// @notice Number of dead entries of `role`'s pool, which the next registrations take.
    function deadPoolEntries(Role role) external view returns (uint256);
    /// @notice Seconds between an unbond request and its withdrawal.
    function unbondingDelay() external view returns (uint64);
    /// @notice Seconds a heartbeat keeps a node online.
    function heartbeatTtl() external view returns (uint64);
}
