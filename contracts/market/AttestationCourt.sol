// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {IJobManager} from "../interfaces/IJobManager.sol";
import {INodeRegistry} from "../interfaces/INodeRegistry.sol";
import {IDisputeCallback} from "../interfaces/IDisputeCallback.sol";
import {IDisputeGame} from "../dispute/interfaces/IDisputeGame.sol";
import {Placement} from "../dispute/lib/DisputeTypes.sol";
import {Credits} from "../libraries/Credits.sol";
import {JobIds} from "../libraries/JobIds.sol";
import {MarketMath} from "../libraries/MarketMath.sol";
import {TensorMerkle} from "../libraries/TensorMerkle.sol";

/// @title AttestationCourt
/// @notice Minimal path to slash a verifier for a false attestation (PROTOCOL §7.1, §7.9): a
///         whistleblower names one attested segment of a unit; the court checks the attestation
///         against the JobManager's record and the segment's start root against the unit's
///         checkpoint root, locks the verifier's penalty (`penaltyOf`: the job's verifier lock S,
///         INCENTIVES §2 item 6), takes the whistleblower's bond (`bondOf`: at least `bond`, at
///         least the reward it stands to win) and opens a segment game (its own DisputeGame
///         instance, whose manager is this court) with the verifier as defender.
///         Challenger wins: the penalty is slashed, the whistleblower gets its bond back plus
///         `rewardBps` of the penalty, the rest goes to the JobManager's jackpot (`fundJackpot`:
///         one jackpot, fed by every slash, pays every catcher). Verifier wins: the lock is
///         released and the bond (the case's, scaled with the penalty) is credited to the
///         verifier, and the entry may be challenged again (one open case per entry at a time;
///         a slashed entry is done). Challenges are accepted until `window` after the unit's
///         challenge deadline, and an entry whose attestation stood in a case until `window`
///         after that case ended. Payouts are pull-based (`withdraw`).
/// @dev Token balance == Σ open bonds + Σ credits. The court must be one of the
///      registry's slashers (fixed at deployment) and `setGame` wires its game once.
contract AttestationCourt is IDisputeCallback, ReentrancyGuard {
    using SafeERC20 for IERC20;
    using Credits for Credits.Ledger;

    struct Case {
        uint256 unitId;
        address verifier;
        address whistleblower;
        uint96 bond;
        uint96 penalty;
        bytes32 entry;
    }

    /// @notice Where an attestation entry stands with the court: `blocked` while a case over it
    ///         is open and for good once its attestation was ruled false; `stoodAt` is when its
    ///         last case ended with the attestation standing (0: none did).
    struct Entry {
        bool blocked;
        uint64 stoodAt;
    }

    error NotDeployer(address caller);
    error GameAlreadySet();
    error GameNotSet();
    error NotWhistleblower(address caller);
    error NotAttested(uint256 unitId, address verifier);
    error AttestationMismatch(uint256 unitId, address verifier);
    error NoSuchSegment(uint256 index, uint256 count);
    error BadStartRoot(uint256 unitId, uint256 segment);
    /// @notice The entry has an open case, or its attestation was ruled false.
    error AlreadyChallenged(uint256 unitId, address verifier, uint256 index);
    /// @notice The court's window for the entry closed at `closedAt`.
    error CourtWindowClosed(uint256 unitId, address verifier, uint256 index, uint256 closedAt);
    error NothingToWithdraw(address account);
    /// @notice `verifier` has no stake left for the court to lock: none free, none unbonding.
    error NoAnswerableStake(address verifier);
    /// @notice The court's `window` is longer than the manager's `recordRetention`: a unit's record
    ///         could be recycled while the court may still take its first case over it.
    error WindowBeyondRetention(uint256 window, uint256 retention);

    /// @notice `whistleblower` took entry `segment` of `verifier`'s attestation of `unitId` to
    ///         court game `gameId` (from `startRoot`, the attested `endRoot`): `penalty` of the
    ///         verifier's stake is locked and `bond` was taken from the whistleblower.
    event AttestationChallenged(
        uint256 indexed unitId, address indexed verifier, address indexed whistleblower,
        uint256 gameId, uint64 segment, bytes32 startRoot, bytes32 endRoot, uint256 penalty, uint256 bond
    ); // forgefmt: disable-line
    event AttestationRuled(uint256 indexed gameId, address indexed verifier, bool falseAttestation);
    event Credited(address indexed account, uint256 amount, uint256 balance);
    event Withdrawn(address indexed account, uint256 amount);

    IJobManager public immutable manager;
    INodeRegistry public immutable registry;
    IERC20 public immutable token;
    address private immutable _deployer;
    /// @notice The least bond a challenge takes (`bondOf` scales it with the penalty).
    uint96 public immutable bond;
    /// @notice The least penalty a false attestation costs (where the verifier's answerable
    ///         stake covers it), whatever the job's verifier lock.
    uint96 public immutable penalty;
    uint16 public immutable rewardBps;
    /// @notice How long after the unit's challenge deadline (or after a case in which the
    ///         attestation stood) an attestation entry may be taken to court: how long a verifier
    ///         must be able to defend it (keep the segment's start state).
    uint32 public immutable window;

    IDisputeGame public game;
    mapping(uint256 gameId => Case) public cases;
    /// @notice Per attestation entry, keyed keccak256(abi.encode(unitId, attempt, verifier, index)).
    mapping(bytes32 key => Entry) public challenged;
    Credits.Ledger private _credits;

    constructor(
        IJobManager manager_,
        INodeRegistry registry_,
        uint96 bond_,
        uint96 penalty_,
        uint16 rewardBps_,
        uint32 window_
    ) {
        // The first case over a unit must find its record (PROTOCOL §6.10); keepRecord holds it
        // for the cases after that.
        uint256 retention = manager_.config().recordRetention;
        if (window_ > retention) revert WindowBeyondRetention(window_, retention);
        manager = manager_;
        registry = registry_;
        token = IERC20(registry_.token());
        _deployer = msg.sender;
        bond = bond_;
        penalty = penalty_;
        rewardBps = rewardBps_ > MarketMath.BPS ? uint16(MarketMath.BPS) : rewardBps_;
        window = window_;
    }

    /// @notice Wires the court's dispute game (whose manager is this court). Deployer, once.
    function setGame(IDisputeGame game_) external {
        if (msg.sender != _deployer) revert NotDeployer(msg.sender);
        if (address(game) != address(0)) revert GameAlreadySet();
        game = game_;
    }

    /// @notice Challenges entry `index` of `verifier`'s attestation of `unitId`: from the unit's
    ///         checkpoint `segment` (`startRoot`, proved by `startProof` against the unit's
    ///         checkpoint root), `k` steps do not give the attested `endRoots[index]`.
    function challengeAttestation(
        uint256 unitId,
        address verifier,
        uint256 index,
        bytes32[] calldata endRoots,
        bytes32 startRoot,
        bytes32[] calldata startProof
    ) external nonReentrant returns (uint256 gameId) {
        if (address(game) == address(0)) revert GameNotSet();
        if (registry.roleOf(msg.sender) != INodeRegistry.Role.Whistleblower) {
            revert NotWhistleblower(msg.sender);
        }
        Segment memory seg = _segment(unitId, verifier, index, startRoot, startProof);
        seg.endRoot = _attested(unitId, verifier, index, endRoots);
        Case memory c;
        {
            uint256 locked = penaltyOf(unitId, verifier);
            if (locked == 0) revert NoAnswerableStake(verifier);
            // penaltyOf is at most uint96.max, and so is _bondFor of it (see there).
            c = Case(unitId, verifier, msg.sender, uint96(_bondFor(locked)), uint96(locked), seg.entry);
        }
        _adoptConfig(JobIds.jobOf(unitId));
        gameId = game.openSegmentGame(
            unitId, verifier, msg.sender, seg.datasetRoot, seg.index * seg.k, seg.k, [startRoot, seg.endRoot]
        );
        cases[gameId] = c;
        emit AttestationChallenged(
            unitId, verifier, msg.sender, gameId, seg.index, startRoot, seg.endRoot, c.penalty, c.bond
        ); // forgefmt: disable-line
        registry.lockAnswerable(verifier, c.penalty);
        // A later case over the job may come at any time (window after a case that stood): keep
        // its record from being recycled (a no-op once kept).
        manager.keepRecord(JobIds.jobOf(unitId));
        token.safeTransferFrom(msg.sender, address(this), c.bond);
    }

    /// @dev Registers with the court's game the dispute config (and a unit job's placement) that
    ///      the job's submitter registered with the job manager's game, the config that solvers
    ///      and verifiers checked before taking part (PROTOCOL §6.8, §7.2). The court's game
    ///      (`managerRegistersOnly`) takes configs from the court only, so no one can register
    ///      another there after the attestations. Nothing is copied when the court's game has a
    ///      config already (copied at an earlier challenge), or when the job manager's arbiter
    ///      has none or is no dispute game (the court's game then refuses the challenge with
    ///      `ConfigNotRegistered`).
    function _adoptConfig(uint256 jobId) private {
        if (game.configOf(jobId) != bytes32(0)) return;
        IDisputeGame source = IDisputeGame(manager.arbiter());
        if (address(source) == address(0)) return;
        try source.configOf(jobId) returns (bytes32 configHash) {
            if (configHash == bytes32(0)) return;
            (uint64 stepOffset, uint32 shards, uint32 shard) = source.placementOf(jobId);
            if (shards == 0) {
                game.registerConfig(jobId, configHash);
            } else {
                game.registerUnitConfig(jobId, configHash, Placement(stepOffset, shards, shard));
            }
        } catch {
            return; // an arbiter that keeps no configs: nothing to copy
        }
    }

    /// @notice What a challenge of `verifier`'s attestation of `unitId` would lock now: the job's
    ///         verifier lock S (`IJobManager.verifierLockOf`), the stake a lazy verifier risks in a
    ///         forced round, and at least `penalty`; at most the verifier's answerable stake
    ///         (`INodeRegistry.answerableStake`: free plus unbonding; a short stake is no reason
    ///         to let a false attestation stand, and unbonding is no way out of a case).
    function penaltyOf(uint256 unitId, address verifier) public view returns (uint256) {
        uint256 amount = manager.verifierLockOf(JobIds.jobOf(unitId));
        if (amount < penalty) amount = penalty;
        // Unbonding stake still answers for attestations made before it was requested (§6.8).
        uint256 answerable = registry.answerableStake(verifier);
        if (amount > answerable) amount = answerable;
        return amount > type(uint96).max ? type(uint96).max : amount;
    }

    /// @notice What a challenge of `verifier`'s attestation of `unitId` would take from the
    ///         whistleblower now: the reward it stands to win (`rewardBps` of `penaltyOf`), at
    ///         least `bond`. A challenge keeps up to S of the verifier's answerable stake locked for a
    ///         whole game, so the whistleblower risks at least what winning would pay it, and a
    ///         verifier whose attestation stands is credited in proportion to what was locked.
    ///         Reverts where `penaltyOf` reverts.
    function bondOf(uint256 unitId, address verifier) external view returns (uint256) {
        return _bondFor(penaltyOf(unitId, verifier));
    }

    /// @dev The bond of a challenge that locks `locked`: what winning it pays, at least `bond`.
    ///      Fits a uint96: `locked` ≤ uint96.max (penaltyOf clamps it) and rewardBps ≤ BPS (the
    ///      constructor clamps it), so the reward is ≤ `locked`; `bond` is a uint96.
    function _bondFor(uint256 locked) private view returns (uint256) {
        uint256 reward = _rewardOf(locked);
        return reward > bond ? reward : bond;
    }

    /// @dev What a winning whistleblower is paid on top of its bond when `penalty_` is slashed.
    function _rewardOf(uint256 penalty_) private view returns (uint256) {
        return MarketMath.share(penalty_, rewardBps);
    }

    struct Segment {
        uint64 index;
        uint64 k;
        bytes32 datasetRoot;
        bytes32 endRoot;
        bytes32 entry;
    }

    /// @dev Entry `index` of `verifier`'s recorded attestation of the unit's current attempt.
    function _attested(uint256 unitId, address verifier, uint256 index, bytes32[] calldata endRoots)
        private
        view
        returns (bytes32)
    {
        (IJobManager.VerifierStatus status, bytes32 attestation) = manager.verifierStatus(unitId, verifier);
        if (status != IJobManager.VerifierStatus.Attested) revert NotAttested(unitId, verifier);
        if (attestation != keccak256(abi.encode(endRoots))) revert AttestationMismatch(unitId, verifier);
        if (index >= endRoots.length) revert NoSuchSegment(index, endRoots.length);
        return endRoots[index];
    }

    /// @dev The attested segment, checked: its start root is entry `segment` of the unit's
    ///      published checkpoint root (`publishedRootOf`); the entry is open to a challenge (none
    ///      open, not ruled false, the court's window open) and is marked as having an open case.
    function _segment(uint256 unitId, address verifier, uint256 index, bytes32 startRoot, bytes32[] calldata proof)
        private
        returns (Segment memory seg)
    {
        uint64[] memory segments = manager.sampledSegments(unitId, verifier);
        if (index >= segments.length) revert NoSuchSegment(index, segments.length);
        seg.index = segments[index];
        IJobManager.Job memory job = manager.getJob(JobIds.jobOf(unitId));
        seg.k = job.checkpointInterval;
        seg.datasetRoot = job.datasetRoot;
        IJobManager.Unit memory unit = manager.getUnit(unitId);
        uint256 n = uint256(job.steps / seg.k) + 1;
        // The published root the verifier replayed from (after a forced reveal the unit's root
        // is the true C, which differs from it where the published data was perturbed).
        bytes32 publishedRoot = manager.publishedRootOf(unitId);
        bool startProven = TensorMerkle.verifyListEntry(
            publishedRoot, TensorMerkle.CHECKPOINT_DOMAIN, n, seg.index, startRoot, proof
        );
        if (!startProven) revert BadStartRoot(unitId, seg.index);
        seg.entry = keccak256(abi.encode(unitId, unit.attempt, verifier, index));
        Entry memory entry = challenged[seg.entry];
        if (entry.blocked) revert AlreadyChallenged(unitId, verifier, index);
        uint64 stoodAt = entry.stoodAt;
        // Open until `window` after the unit's challenge deadline, or after the last case in
        // which the attestation stood: a case that ends late (a whistleblower's sybil of the
        // verifier playing for time) cannot run the clock out on honest whistleblowers.
        uint256 closedAt = uint256(stoodAt > unit.deadline ? stoodAt : unit.deadline) + window;
        if (block.timestamp > closedAt) revert CourtWindowClosed(unitId, verifier, index, closedAt);
        challenged[seg.entry].blocked = true;
    }

    /// @inheritdoc IDisputeCallback
    function onDisputeResolved(uint256 gameId, uint256 unitId, bool challengerWon) external nonReentrant {
        if (msg.sender != address(game)) revert NotArbiter(msg.sender);
        Case memory c = cases[gameId];
        if (c.verifier == address(0) || c.unitId != unitId) revert UnknownGame(gameId, unitId);
        delete cases[gameId];
        emit AttestationRuled(gameId, c.verifier, challengerWon);
        if (challengerWon) {
            uint256 reward = _rewardOf(c.penalty);
            _credit(c.whistleblower, uint256(c.bond) + reward);
            uint256 toJackpot = uint256(c.penalty) - reward;
            // The slashed penalty arrives here; the manager pulls its jackpot share right away.
            registry.slash(c.verifier, c.penalty, true);
            _fundJackpot(toJackpot);
        } else {
            // The attestation stood: the entry may be challenged again (another whistleblower
            // is not bound by how this one played). The failed bond: `rewardBps` of it to the
            // verifier whose stake the case held, the rest to the jackpot, so that a sybil of the
            // verifier holding the entry with back-to-back losing cases pays for each of them.
            challenged[c.entry] = Entry(false, uint64(block.timestamp));
            uint256 kept = MarketMath.share(c.bond, rewardBps);
            uint256 toJackpot = uint256(c.bond) - kept;
            _credit(c.verifier, kept);
            registry.release(c.verifier, c.penalty, false);
            _fundJackpot(toJackpot);
        }
    }

    /// @notice What `account` may withdraw.
    function credits(address account) external view returns (uint256) {
        return _credits.owed(account);
    }

    /// @notice Transfers the caller's credited balance.
    function withdraw() external nonReentrant {
        uint256 amount = _credits.take(msg.sender);
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        emit Withdrawn(msg.sender, amount);
        token.safeTransfer(msg.sender, amount);
    }

    /// @dev Hands `amount` of the tokens this court holds to the manager's jackpot.
    function _fundJackpot(uint256 amount) private {
        if (amount == 0) return;
        token.forceApprove(address(manager), amount);
        manager.fundJackpot(amount);
    }

    function _credit(address account, uint256 amount) private {
        if (amount == 0) return;
        uint256 balance = _credits.add(account, amount);
        emit Credited(account, amount, balance);
    }
}
