// Integration through the ABI alone: a JavaScript client (ethers v6) that loads
// build/abi/*.json, mints test tokens, posts a job on the JobManager and reads its events.
// Usage: node post_job.mjs <rpcUrl> <privateKey> <deployment.json> <params.json>
// Prints one JSON object: {"jobId", "txHash", "events": [{name, args}]}.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ethers } from "ethers";

const [rpcUrl, key, deploymentPath, paramsPath] = process.argv.slice(2);
const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const abi = (name) => JSON.parse(readFileSync(join(repo, "build", "abi", `${name}.json`))).abi;

// cacheTimeout -1: ethers' default 250 ms cache would hand Anvil a stale nonce.
const provider = new ethers.JsonRpcProvider(rpcUrl, undefined, { cacheTimeout: -1 });
const wallet = new ethers.Wallet(key, provider);
const addrs = JSON.parse(readFileSync(deploymentPath));
const p = JSON.parse(readFileSync(paramsPath));
const token = new ethers.Contract(addrs.Token, abi("TestToken"), wallet);
const manager = new ethers.Contract(addrs.JobManager, abi("JobManager"), wallet);

await (await token.mint(wallet.address, BigInt(p.reward))).wait();
await (await token.approve(addrs.JobManager, BigInt(p.reward))).wait();
const latest = await provider.getBlock("latest");
const params = {
  specHash: p.specHash,
  datasetRoot: p.datasetRoot,
  initialStateRoot: p.initialStateRoot,
  steps: p.steps,
  checkpointInterval: p.checkpointInterval,
  required: { deviceClass: 0, memoryMiB: 0, throughput: 0 },
  reward: BigInt(p.reward),
  verificationFee: BigInt(p.verificationFee),
  claimDeadline: latest.timestamp + 3600,
  computeTime: 3600,
};
await manager.postJob.staticCall(params); // simulate first
const receipt = await (await manager.postJob(params)).wait();
const events = [];
for (const name of ["JobPosted", "UnitOpened"]) {
  for (const ev of await manager.queryFilter(manager.filters[name](), receipt.blockNumber)) {
    events.push({ name, args: ev.args.toObject(true) });
  }
}
const posted = events.find((e) => e.name === "JobPosted");
const replacer = (_, v) => (typeof v === "bigint" ? v.toString() : v);
console.log(JSON.stringify({ jobId: posted.args.jobId, txHash: receipt.hash, events }, replacer));
