// An integrator's journey in JavaScript alone (issue 28: "no Python in the client's path"): start
// Anvil, deploy and wire the protocol from build/abi/ (PROTOCOL §6.12's order), hash the example
// spec, compute S_0's root and the dispute config (clients/js/vtp.mjs), post the job, register its
// config, decode the registry's and the token's custom errors BY NAME with build/abi/protocol.json
// alone, and follow the job's events by name to its cancellation.
//
// Run: `node --test tests/js/` (needs `make compile`'s build/abi/; RPC_URL=... uses a running dev
// chain instead of starting Anvil). VTP_JS_OUT=file writes the client's hashes, which
// tests/js/test_journey_js.py compares with the Python agents'.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { ethers } from "ethers";
import * as vtp from "../../clients/js/vtp.mjs";

const ROOT = new URL("../../", import.meta.url);
const read = (path) => JSON.parse(readFileSync(new URL(path, ROOT), "utf8"));
const artifact = (name) => read(`build/abi/${name}.json`);
const protocol = artifact("protocol");
const errorsAndEvents = new ethers.Interface(protocol.abi);
const enums = protocol.enums;

const E18 = 10n ** 18n;
const HOUR = 3600;
const DAY = 24 * HOUR;
// PROTOCOL §6.4 defaults
const REGISTRY_CONFIG = {
  minSolverStake: 100n * E18, minVerifierStake: 50n * E18, minWhistleblowerStake: 10n * E18,
  unbondingDelay: 7 * DAY, heartbeatTtl: HOUR,
};
const MANAGER_CONFIG = {
  claimWindow: HOUR, verifyWindow: DAY, disputeGrace: HOUR, taxBps: 200,
  challengerRewardBps: 5000, collateralBps: 10000, verifiersPerUnit: 2, segmentsPerVerifier: 2,
  verifierLock: 10n * E18, challengeBond: 10n * E18, forcedErrorBps: 500, lazySlashFactor: 68,
  revealWindow: HOUR, recordRetention: 8 * DAY,
};
// N of the spec's named dataset (PROTOCOL §4.2: sklearn-digits/train has 1438 examples)
const EXAMPLES = { "sklearn-digits/train": 1438 };

let anvil;
let provider;

async function startAnvil() {
  anvil = spawn(new URL("node_modules/.bin/anvil", ROOT).pathname, ["--port", "0"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let seen = "";
    anvil.stdout.on("data", (chunk) => {
      seen += chunk;
      const match = seen.match(/Listening on ([\d.]+:\d+)/);
      if (match) resolve(`http://${match[1]}`);
    });
    anvil.on("exit", (code) => reject(new Error(`anvil exited (${code}) before listening`)));
  });
}

before(async () => {
  const url = process.env.RPC_URL || (await startAnvil());
  provider = new ethers.JsonRpcProvider(url, undefined, { pollingInterval: 100 });
});

after(() => {
  provider?.destroy();
  anvil?.kill();
});

async function deploy(signer, name, ...args) {
  const { abi, bytecode } = artifact(name);
  const contract = await new ethers.ContractFactory(abi, bytecode, signer).deploy(...args);
  await contract.waitForDeployment();
  return contract;
}

const mined = async (pending) => (await pending).wait();

// The custom error a reverted call carries, decoded with protocol.json alone.
async function revertOf(call) {
  try {
    await call();
  } catch (err) {
    const data = err.data ?? err.info?.error?.data;
    assert.ok(data, `no revert data in ${err.message}`);
    return errorsAndEvents.parseError(data);
  }
  assert.fail("the call did not revert");
}

test("deploy, hash the spec, post, decode errors by name, follow the job's events", async () => {
  const [deployer, submitter, solver] = await Promise.all([0, 1, 2].map((i) => provider.getSigner(i)));

  // --- deployment and wiring, in PROTOCOL §6.12's order (the court and round manager left out)
  const token = await deploy(deployer, "TestToken");
  const registry = await deploy(deployer, "NodeRegistry", await token.getAddress(), REGISTRY_CONFIG);
  const manager = await deploy(deployer, "JobManager", await registry.getAddress(), MANAGER_CONFIG);
  const extension = await deploy(deployer, "JobManagerExtension", await manager.getAddress());
  await mined(manager.setExtension(await extension.getAddress()));
  const prover = await deploy(deployer, "OneStepProver");
  const game = await deploy(deployer, "DisputeGame", await manager.getAddress(), await prover.getAddress(), HOUR, false);
  await mined(registry.setSlashers([await manager.getAddress()]));
  await mined(manager.setArbiter(await game.getAddress()));

  // --- what the submitter computes from the spec alone
  const spec = read("examples/digits-mlp.json");
  const numExamples = EXAMPLES[spec.dataset.name];
  const specHash = vtp.specHash(spec);
  const initialStateRoot = vtp.initialStateRoot(spec);
  const { graphRoot, configHash } = vtp.disputeConfig(spec, numExamples);
  if (process.env.VTP_JS_OUT) {
    const out = { spec: "examples/digits-mlp.json", numExamples, specHash, initialStateRoot, graphRoot, configHash };
    writeFileSync(process.env.VTP_JS_OUT, JSON.stringify(out, null, 1));
  }

  // --- escrow and post
  const reward = 100n * E18;
  const asSubmitter = (c) => c.connect(submitter);
  await mined(asSubmitter(token).mint(submitter.address, reward));
  await mined(asSubmitter(token).approve(await manager.getAddress(), reward));
  const now = (await provider.getBlock("latest")).timestamp;
  const params = {
    specHash, datasetRoot: spec.dataset.root, initialStateRoot, steps: spec.steps,
    checkpointInterval: spec.checkpoint_every,
    required: { deviceClass: 0, memoryMiB: 0, throughput: 0 },
    reward, verificationFee: 10n * E18, claimDeadline: now + HOUR, computeTime: HOUR,
    configHash, // the dispute config, bound to the job as it is posted (PROTOCOL §7.2)
  };
  const posted = await mined(asSubmitter(manager).postJob(params));
  const jobPosted = posted.logs.map((l) => errorsAndEvents.parseLog(l)).find((e) => e?.name === "JobPosted");
  const jobId = jobPosted.args.jobId;
  assert.equal(jobPosted.args.specHash, specHash);
  assert.equal(jobPosted.args.submitter, submitter.address);
  const onChain = await manager.getJob(jobId); // the chain holds what the client computed
  assert.equal(onChain.submitter, submitter.address);
  assert.equal(onChain.status, BigInt(enums["IJobManager.JobStatus"].Open));
  assert.deepEqual(
    [onChain.specHash, onChain.datasetRoot, onChain.initialStateRoot, onChain.steps, onChain.escrow, onChain.configHash],
    [specHash, spec.dataset.root, initialStateRoot, BigInt(spec.steps), reward, configHash],
  );
  // the game reads the config posted with the job; it cannot be registered again
  assert.equal(await game.configOf(jobId), configHash);
  const again = await revertOf(() => asSubmitter(game).registerConfig.staticCall(jobId, configHash));
  assert.equal(again.name, "ConfigAlreadyRegistered");

  // --- the registry's and the token's custom errors, by name
  const solverRole = enums["INodeRegistry.Role"].Solver;
  const capability = { deviceClass: 1, memoryMiB: 1024, throughput: 1 };
  const asSolver = (c) => c.connect(solver);
  await mined(asSolver(token).mint(solver.address, 200n * E18));
  const noAllowance = await revertOf(() => asSolver(registry).register.staticCall(solverRole, capability, 100n * E18));
  assert.equal(noAllowance.name, "ERC20InsufficientAllowance"); // raised by the token
  assert.deepEqual([...noAllowance.args], [await registry.getAddress(), 0n, 100n * E18]);
  await mined(asSolver(token).approve(await registry.getAddress(), 200n * E18));
  const belowMinimum = await revertOf(() => asSolver(registry).register.staticCall(solverRole, capability, 50n * E18));
  assert.equal(belowMinimum.name, "StakeBelowMinimum");
  assert.deepEqual([...belowMinimum.args], [50n * E18, REGISTRY_CONFIG.minSolverStake]);
  assert.equal(belowMinimum.signature, "StakeBelowMinimum(uint256,uint256)");
  assert.ok(protocol.errors[belowMinimum.selector]); // the selector table agrees
  await mined(asSolver(registry).register(solverRole, capability, 150n * E18));

  // --- a claim; a cancellation by anyone but the submitter, refused; the submitter's (allowed
  // while no unit is assigned, PROTOCOL §6.3), which refunds the escrow
  const unitId = (jobId << 32n) | 0n;
  await mined(asSolver(manager).claim(unitId, ethers.keccak256(ethers.AbiCoder.defaultAbiCoder().encode(["uint256"], [7n]))));
  const notSubmitter = await revertOf(() => asSolver(manager).cancelJob.staticCall(jobId));
  assert.equal(notSubmitter.name, "NotSubmitter");
  await mined(asSubmitter(manager).cancelJob(jobId));
  const job = await manager.getJob(jobId);
  assert.equal(Number(job.status), enums["IJobManager.JobStatus"].Cancelled);

  // --- follow the job: every log of the manager and the game, decoded by name with protocol.json
  const logs = await provider.getLogs({ address: [await manager.getAddress(), await game.getAddress()], fromBlock: 0 });
  const ofJob = logs
    .map((l) => errorsAndEvents.parseLog(l))
    .filter((e) => e && (e.args.jobId === jobId || (e.args.unitId !== undefined && e.args.unitId >> 32n === jobId)));
  const names = ofJob.map((e) => e.name);
  for (const log of logs) assert.ok(protocol.events[log.topics[0]], `unknown topic ${log.topics[0]}`);
  assert.deepEqual(
    names.filter((n) => ["JobPosted", "UnitOpened", "UnitClaimed", "JobCancelled"].includes(n)),
    ["JobPosted", "UnitClaimed", "JobCancelled"], // the first attempt opens with JobPosted
  );
  const cancelled = ofJob.find((e) => e.name === "JobCancelled");
  assert.equal(cancelled.args.refund, reward);
});
