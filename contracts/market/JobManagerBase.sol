// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {IJobManager} from "../interfaces/IJobManager.sol";
import {INodeRegistry} from "../interfaces/INodeRegistry.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Credits} from "../libraries/Credits.sol";
import {JobIds} from "../libraries/JobIds.sol";
import {MarketMath} from "../libraries/MarketMath.sol";
import {ForcedErrors} from "../libraries/ForcedErrors.sol";

/// @title JobManagerBase
/// @notice The job manager's storage, parameters and shared rules (docs/PROTOCOL.md §6), common to
///         the `JobManager` and the `JobManagerExtension` that runs its rare paths on the same
///         storage (by DELEGATECALL): both inherit this layout and nothing else that takes a slot.
/// @dev Storage is recycled (PROTOCOL §6.10): a job and its unit live in a `Record`, and a record
///      whose job has settled and that nothing can still read (`recordRetention` after its
///      deadline) takes the next job, so the job's slots are overwritten (5,000 gas each) instead
///      of filled (22,100). A job id names its record and the record's generation; a stale id
///      reads as unknown. Every field a job reads is written before it is read (counts are reset
///      with the slot they share, the assignment and the commitment when the unit gets there, and
///      read only once the status says they are the current attempt's), so nothing is cleared.
///      Records of jobs posted by contracts are kept for good, in a range of their own
///      (`KEPT_RECORDS`): their logic may read them at any later time.
abstract contract JobManagerBase is ReentrancyGuard {
    using Credits for Credits.Ledger;

    /// @notice At most this many solvers claim one unit (bounds the selection loop).
    uint256 public constant MAX_CLAIMANTS = 16;
    /// @notice A job's first claim window closes at most this long after posting: claims lock
    ///         collateral until it closes and cannot be withdrawn (PROTOCOL §6.3).
    uint256 public constant MAX_CLAIM_HORIZON = 1 days;
    /// @notice Records of jobs posted by contracts are numbered from `KEPT_RECORDS + 1` and never
    ///         recycled; records of other jobs are numbered from 1 (PROTOCOL §6.10).
    uint256 public constant KEPT_RECORDS = 1 << 31;
    /// @dev `_findVerifier`'s answer for an account that was not drawn.
    uint256 internal constant NOT_DRAWN = type(uint256).max;
    /// @dev `Record.flags`: the solver proved a forced error in this attempt.
    uint8 internal constant FORCED_REVEALED = 1;
    /// @dev `Record.flags`: the record is never recycled (`keepRecord`).
    uint8 internal constant KEPT = 2;
    /// @dev `Record.flags`: a unit job of the wired round manager (its claims follow the
    ///      placement rule, PROTOCOL §6.9).
    uint8 internal constant ROUND_UNIT = 4;

    struct Claimant {
        address solver;
        uint96 weight;
    }

    /// @dev One slot per drawn verifier; its seal, then its attestation hash, lives in `_attestations`.
    struct VerifierSlot {
        address verifier;
        IJobManager.VerifierStatus status;
        // judged RIGHT at a forced reveal: paid its catcher share at finalize (same slot)
        bool caught;
    }

    /// @dev A job and its one unit (protocol v1), packed by who reads what: slot 0 is the unit's
    ///      state, which every action reads; slot 1 the assignment; slot 2 what pays and shapes
    ///      the job; slot 3 who posted it and what it needs; then the six roots and the job's
    ///      dispute config hash. `Job` and `Unit` (the views) are assembled from it.
    struct Record {
        // slot 0
        IJobManager.UnitStatus status;
        uint8 claimantCount;
        uint8 verifierCount;
        uint8 attestCount;
        uint8 flags;
        uint40 deadline;
        uint40 seedBlock;
        uint32 attempt;
        uint8 generation;
        uint64 verifySeed;
        uint32 computeTime;
        // slot 1
        address assignee;
        uint8 assigneeIndex;
        uint64 assignSeed;
        // slot 2
        uint96 reward;
        uint96 verificationFee;
        uint32 steps;
        uint32 checkpointInterval;
        // slot 3
        address submitter;
        uint16 deviceClass;
        uint32 memoryMiB;
        uint32 throughput;
        // slots 4 to 10
        bytes32 specHash;
        bytes32 datasetRoot;
        bytes32 initialStateRoot;
        bytes32 checkpointRoot;
        bytes32 finalStateRoot;
        bytes32 seal;
        bytes32 configHash;
    }

    IERC20 internal immutable _token;
    INodeRegistry internal immutable _registry;
    address internal immutable _judge;

    uint32 internal immutable _claimWindow;
    uint32 internal immutable _verifyWindow;
    uint32 internal immutable _disputeGrace;
    uint16 internal immutable _taxBps;
    uint16 internal immutable _challengerRewardBps;
    uint16 internal immutable _collateralBps;
    uint8 internal immutable _verifiersPerUnit;
    uint8 internal immutable _segmentsPerVerifier;
    uint96 internal immutable _verifierLock;
    uint96 internal immutable _challengeBond;
    uint16 internal immutable _forcedErrorBps;
    uint16 internal immutable _lazySlashFactor;
    uint32 internal immutable _revealWindow;
    uint32 internal immutable _recordRetention;

    // The state below is written by one half and read by the other (JobManager and
    // JobManagerExtension share it by DELEGATECALL): slither, which analyses each contract alone,
    // reports what one half only reads as never initialized (docs/SLITHER.md).
    // One slot, read and written by every postJob.
    // slither-disable-next-line uninitialized-state
    address internal _arbiter;
    uint32 internal _jobCount;
    uint32 internal _recordCount;
    /// @dev The recycled record the next postJob looks at first (0 before the first job).
    uint32 internal _cursor;

    uint32 internal _keptCount;
    uint256 internal _jackpot;

    mapping(uint256 record => Record) internal _records;
    // slither-disable-next-line uninitialized-state
    mapping(uint256 record => mapping(uint256 index => Claimant)) internal _claimants;
    mapping(uint256 record => mapping(uint256 index => bytes32)) internal _secretHashes;
    mapping(uint256 record => mapping(uint256 index => VerifierSlot)) internal _verifiers;
    mapping(uint256 record => mapping(uint256 index => bytes32)) internal _attestations;
    // slither-disable-next-line uninitialized-state
    mapping(uint256 record => IJobManager.Dispute) internal _disputes;
    // slither-disable-next-line uninitialized-state
    mapping(uint256 gameId => uint256 unitId) internal _gameUnits;
    /// @dev When a challenger's win is held (`DisputeResultHeld`), the time after which
    ///      `settleDispute` applies it.
    // slither-disable-next-line uninitialized-state
    mapping(uint256 record => uint64 until) internal _holdEnds;
    /// @dev The published root P of a unit whose forced error was revealed (its checkpointRoot
    ///      is then C); read through `publishedRootOf` only while FORCED_REVEALED is set.
    // slither-disable-next-line uninitialized-state
    mapping(uint256 record => bytes32) internal _publishedRoots;
    Credits.Ledger internal _credits;

    /// @dev A unit's open data request (PROTOCOL §6.11), in seven slots: who and until when
    ///      (read by every call); the bond, the seed block and the cursors (written by every
    ///      header and sample call); the state root and its tree; the seed, once drawn; the
    ///      layout root; the chunks opened. Cleared when the request is answered, expires or
    ///      is voided; `requester` is zero when none is open.
    struct DataRequestSlot {
        // slot 0
        address requester;
        uint32 checkpoint;
        uint40 answerDeadline;
        // slot 1
        uint96 bond;
        uint40 seedBlock;
        uint32 tensorCount;
        uint32 opened;
        uint32 samples;
        // slot 2, 3: the opened state (`openDataState`), zero until then
        bytes32 stateRoot;
        bytes32 stateTree;
        // slot 4: the hash of `seedBlock`, once the first samples drew it
        bytes32 seed;
        // slot 5, 6: the layout tree (once every header is open), the chunks opened so far
        bytes32 layoutRoot;
        uint64 totalLeaves;
    }

    // slither-disable-next-line uninitialized-state
    mapping(uint256 record => DataRequestSlot) internal _dataRequests;
    /// @dev The layout subtree of each part of a multi-part opening (`DATA_OPEN_PART` tensors),
    ///      combined by the part that opens the last tensor. Overwritten by the record's next one.
    // slither-disable-next-line uninitialized-state
    mapping(uint256 record => mapping(uint256 part => bytes32 layoutTree)) internal _dataParts;
    /// @dev Whether `requester` requested data in `attempt` of `unitId` (once per requester per
    ///      attempt). Keyed by the unit id, which names the record's generation: a recycled
    ///      record's new job starts with no marks.
    // slither-disable-next-line uninitialized-state
    mapping(uint256 unitId => mapping(uint32 attempt => mapping(address requester => bool))) internal
        _dataRequested;

    constructor(address registry_, IJobManager.Config memory cfg, address judge) {
        if (registry_ == address(0)) revert IJobManager.ZeroAddress();
        if (cfg.taxBps + uint256(cfg.challengerRewardBps) > 2 * MarketMath.BPS) revert IJobManager.InvalidConfig();
        if (cfg.taxBps >= MarketMath.BPS) revert IJobManager.InvalidConfig();
        if (cfg.challengerRewardBps > MarketMath.BPS) revert IJobManager.InvalidConfig();
        if (cfg.claimWindow == 0) revert IJobManager.InvalidConfig();
        if (cfg.verifyWindow == 0) revert IJobManager.InvalidConfig();
        if (cfg.revealWindow == 0) revert IJobManager.InvalidConfig();
        if (cfg.forcedErrorBps > MarketMath.BPS) revert IJobManager.InvalidConfig();
        if (cfg.segmentsPerVerifier == 0) revert IJobManager.InvalidConfig();
        _registry = INodeRegistry(registry_);
        _token = IERC20(INodeRegistry(registry_).token());
        _judge = judge;
        _claimWindow = cfg.claimWindow;
        _verifyWindow = cfg.verifyWindow;
        _disputeGrace = cfg.disputeGrace;
        _taxBps = cfg.taxBps;
        _challengerRewardBps = cfg.challengerRewardBps;
        _collateralBps = cfg.collateralBps;
        _verifiersPerUnit = cfg.verifiersPerUnit;
        _segmentsPerVerifier = cfg.segmentsPerVerifier;
        _verifierLock = cfg.verifierLock;
        _challengeBond = cfg.challengeBond;
        _forcedErrorBps = cfg.forcedErrorBps;
        _lazySlashFactor = cfg.lazySlashFactor;
        _revealWindow = cfg.revealWindow;
        _recordRetention = cfg.recordRetention;
    }

    // ------------------------------------------------------------------ records

    /// @dev The record of `jobId` and whether `jobId` is its current job.
    function _job(uint256 jobId) internal view returns (Record storage r, bool live) {
        uint256 record = JobIds.recordOf(jobId);
        r = _records[record];
        live = r.status != IJobManager.UnitStatus.None && jobId == JobIds.fromRecord(record, r.generation);
    }

    /// @dev The record of `unitId`, its number, and whether `unitId` is its current job's unit.
    function _unit(uint256 unitId) internal view returns (Record storage r, uint256 record, bool live) {
        record = JobIds.recordOf(JobIds.jobOf(unitId));
        r = _records[record];
        live = r.status != IJobManager.UnitStatus.None
            && unitId == JobIds.unitId(JobIds.fromRecord(record, r.generation), 0);
    }

    /// @dev The live unit `unitId` in `expected` status, else WrongUnitStatus (None for a stale id).
    function _expect(uint256 unitId, IJobManager.UnitStatus expected)
        internal
        view
        returns (Record storage r, uint256 record)
    {
        bool live;
        (r, record, live) = _unit(unitId);
        IJobManager.UnitStatus status = live ? r.status : IJobManager.UnitStatus.None;
        if (status != expected) revert IJobManager.WrongUnitStatus(unitId, expected, status);
    }

    // ------------------------------------------------------------------ rules

    function _jobStatus(IJobManager.UnitStatus status) internal pure returns (IJobManager.JobStatus) {
        if (status == IJobManager.UnitStatus.Finalized) return IJobManager.JobStatus.Completed;
        if (status == IJobManager.UnitStatus.Cancelled) return IJobManager.JobStatus.Cancelled;
        return IJobManager.JobStatus.Open;
    }

    function _collateral(Record storage r) internal view returns (uint256) {
        return MarketMath.share(r.reward, _collateralBps);
    }

    /// @dev The bond a challenge of the unit takes (`challengeBondOf`): what a winning challenger
    ///      is paid on top of its bond (`_slashAssignee`: the same share of the same collateral,
    ///      rounded alike), at least `challengeBond`. Clamped to uint96.max, the width of
    ///      `Dispute.bond`: only a collateralBps above 10 000 on a reward near uint96.max exceeds
    ///      it (challengerRewardBps <= BPS, checked at deployment).
    function _bondFor(Record storage r) internal view returns (uint256) {
        uint256 bond = MarketMath.share(_collateral(r), _challengerRewardBps);
        if (bond < _challengeBond) return _challengeBond;
        return bond > type(uint96).max ? type(uint96).max : bond;
    }

    /// @dev The per-unit verifier lock of the job (`verifierLockOf`): a function of the job's fixed
    ///      parameters and the deployment's, so the draw, the release and the slash agree.
    function _lock(Record storage r) internal view returns (uint256) {
        // The solver's pay (`payout`'s first value): reward − fee − tax.
        uint256 reward = r.reward;
        uint256 solverPay = reward - r.verificationFee - MarketMath.share(reward, _taxBps);
        return MarketMath.verifierLock(
            solverPay, _segmentsPerVerifier, r.steps / r.checkpointInterval, _lazySlashFactor, _verifierLock
        );
    }

    /// @dev Index of `verifier` among the `n` drawn verifiers of the record's current attempt, or
    ///      NOT_DRAWN. At most `verifiersPerUnit` slots are scanned.
    function _findVerifier(uint256 record, uint256 n, address verifier) internal view returns (uint256) {
        for (uint256 i = 0; i < n; ++i) {
            if (_verifiers[record][i].verifier == verifier) return i;
        }
        return NOT_DRAWN;
    }

    // ------------------------------------------------------------------ transitions

    function _releaseClaimants(uint256 record, uint256 unitId, uint256 n, address keep, uint256 collateral)
        internal
    {
        for (uint256 i = 0; i < n; ++i) {
            address solver = _claimants[record][i].solver;
            if (solver != keep) emit IJobManager.ClaimReleased(unitId, solver);
        }
        for (uint256 i = 0; i < n; ++i) {
            address solver = _claimants[record][i].solver;
            if (solver != keep) _registry.release(solver, collateral, false);
        }
    }

    /// @dev Pays each catcher of the unit's forced error `J / 2^(k−1)` (J = the fee, k catchers),
    ///      at most an equal share of the jackpot's balance, which by now holds this unit's tax and
    ///      the locks of the verifiers it penalised.
    function _payCatchers(uint256 unitId, uint256 record, uint256 verifierCount, uint256 fee) internal {
        uint256 caught = 0;
        for (uint256 i = 0; i < verifierCount; ++i) {
            if (_verifiers[record][i].caught) ++caught;
        }
        uint256 share = ForcedErrors.catcherShare(fee, caught, _jackpot);
        for (uint256 i = 0; i < verifierCount; ++i) {
            VerifierSlot memory slot = _verifiers[record][i];
            if (!slot.caught) continue;
            emit IJobManager.JackpotPaid(unitId, slot.verifier, share);
            _credit(slot.verifier, share);
        }
        // caught * share <= _jackpot: catcherShare caps the share at _jackpot / caught.
        _jackpot -= caught * share;
    }

    function _credit(address account, uint256 amount) internal {
        // A zero credit (a submitter's zero data-request bond) moves nothing. Slither's taint
        // runs from a request's deadline to its bond through their shared struct (docs/SLITHER.md).
        // slither-disable-next-line incorrect-equality
        if (amount == 0) return;
        uint256 balance = _credits.add(account, amount);
        emit IJobManager.Credited(account, amount, balance);
    }

    function _addJackpot(uint256 amount) internal {
        // slither-disable-next-line incorrect-equality
        if (amount == 0) return;
        uint256 total = _jackpot + amount;
        _jackpot = total;
        emit IJobManager.JackpotIncreased(amount, total);
    }
}
