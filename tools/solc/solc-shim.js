#!/usr/bin/env node
// A native-solc look-alike backed by solcjs (the npm package `solc`), so that ape-solidity
// (py-solc-x), slither and forge can compile without downloading a compiler.
//
// Supported: `--version`, and `--standard-json` (input on stdin) with `--base-path`,
// `--include-path` (repeatable) and `--allow-paths` honoured by the import callback.
// Why not solcjs's own CLI: it prints a `>>> Cannot retry compilation with SMT` line before the
// JSON, and exiting with process.exit() right after a large write truncates stdout at 64 KiB,
// so this script writes with a callback and lets Node exit on its own.
"use strict";
const fs = require("fs");
const path = require("path");
const solc = require("solc");

function nativeVersion() {
  // solcjs reports e.g. 0.8.37+commit.f401782d.Emscripten.clang; native builds say .Linux.g++
  return solc.version().replace(/\.Emscripten\.clang$/, ".Linux.g++");
}

function parseArgs(argv) {
  const opts = { basePath: null, includePaths: [], allowPaths: [], standardJson: false,
    version: false, help: false, unknown: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const [flag, inline] = arg.includes("=") ? arg.split(/=(.*)/s) : [arg, null];
    const value = () => (inline !== null ? inline : argv[++i]);
    switch (flag) {
      case "--version": opts.version = true; break;
      case "--help": opts.help = true; break;
      case "--standard-json": opts.standardJson = true; break;
      case "--base-path": opts.basePath = value(); break;
      case "--include-path": opts.includePaths.push(value()); break;
      case "--allow-paths": opts.allowPaths.push(...value().split(",").filter(Boolean)); break;
      default: opts.unknown.push(arg);
    }
  }
  return opts;
}

function makeImportCallback(opts) {
  const roots = [opts.basePath || process.cwd(), ...opts.includePaths].map((p) => path.resolve(p));
  const allowed = [...roots, ...opts.allowPaths.map((p) => path.resolve(p))];
  const isAllowed = (file) => allowed.some((dir) => file === dir || file.startsWith(dir + path.sep));
  return (importPath) => {
    const candidates = path.isAbsolute(importPath)
      ? [importPath]
      : roots.map((root) => path.join(root, importPath));
    for (const file of candidates) {
      if (fs.existsSync(file) && fs.statSync(file).isFile()) {
        if (!isAllowed(path.resolve(file))) {
          return { error: `File outside of allowed directories: ${file}` };
        }
        return { contents: fs.readFileSync(file, "utf8") };
      }
    }
    return { error: `File not found: ${importPath} (searched ${roots.join(", ")})` };
  };
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.version) {
    process.stdout.write(
      `solc, the solidity compiler commandline interface\nVersion: ${nativeVersion()}\n`);
    return;
  }
  if (opts.help || !opts.standardJson) {
    const why = opts.unknown.length ? `unsupported arguments: ${opts.unknown.join(" ")}\n` : "";
    process.stderr.write(
      `${why}usage: solc --version | solc --standard-json [--base-path P] ` +
      `[--include-path P]... [--allow-paths A,B] < input.json\n`);
    process.exitCode = opts.help ? 0 : 1;
    return;
  }
  const chunks = [];
  process.stdin.on("data", (c) => chunks.push(c));
  process.stdin.on("end", () => {
    const input = Buffer.concat(chunks).toString("utf8");
    const output = solc.compile(input, { import: makeImportCallback(opts) });
    // Write and let the event loop drain: no process.exit(), which would truncate at 64 KiB.
    process.stdout.write(output + "\n");
  });
}

main();
