#!/usr/bin/env python3
"""Runs docs/ci/nightly-matrix.yml's harness steps (ids starting with
`ckpt_`) locally, as the CI matrix would: each shard job's steps with
SHARD=1..N (N = the matrix's length, which must equal the workflow's
SHARDS), then the merge job's, in a scratch folder whose `build` is the
tree's build. Checks each step's exit status and that the merged report
has every record of the shards and no unexpected verdict.

usage: ci_matrix.py WORKFLOW.yml BUILD_DIR SCRATCH_DIR [SUITE]   (SUITE default: smoke)"""
import json
import os
import shutil
import subprocess
import sys

import yaml


def steps(job):
    return [s for s in job["steps"] if str(s.get("id", "")).startswith("ckpt_")]


def run(cmd, cwd, env):
    print(f"$ {cmd}", flush=True)
    p = subprocess.run(["bash", "-eo", "pipefail", "-c", cmd], cwd=cwd, env=env)
    if p.returncode != 0:
        sys.exit(f"ci_matrix: step failed (exit {p.returncode}): {cmd}")


def main(argv):
    if len(argv) not in (3, 4):
        sys.exit(__doc__.strip().split("\n")[-1])
    workflow, build, scratch = argv[:3]
    suite = argv[3] if len(argv) == 4 else "smoke"
    with open(workflow) as f:
        wf = yaml.safe_load(f)
    shards = wf["jobs"]["shard"]["strategy"]["matrix"]["shard"]
    if int(wf["env"]["SHARDS"]) != len(shards) or shards != list(range(1, len(shards) + 1)):
        sys.exit(f"ci_matrix: env SHARDS={wf['env']['SHARDS']} but matrix.shard is {shards}")
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    os.symlink(os.path.abspath(build), os.path.join(scratch, "build"))
    env = {**os.environ, **{k: str(v) for k, v in wf["env"].items()}, "SUITE": suite}
    if not steps(wf["jobs"]["shard"]) or not steps(wf["jobs"]["merge"]):
        sys.exit("ci_matrix: no ckpt_ step in the shard or the merge job")
    for shard in shards:
        for step in steps(wf["jobs"]["shard"]):
            run(step["run"], scratch, {**env, "SHARD": str(shard)})
    for step in steps(wf["jobs"]["merge"]):
        run(step["run"], scratch, env)
    counts = []
    for d in [f"shard-{s}" for s in shards] + ["report"]:
        with open(os.path.join(scratch, d, "summary.json")) as f:
            summary = json.load(f)
        records = summary["records"] if isinstance(summary, dict) else summary
        counts.append(len(records))
    if counts[-1] != sum(counts[:-1]) or counts[-1] == 0:
        sys.exit(f"ci_matrix: merged report has {counts[-1]} records, the shards {counts[:-1]}")
    print(f"ci_matrix: {len(shards)} shards ({', '.join(map(str, counts[:-1]))} records) merged into {counts[-1]}")


if __name__ == "__main__":
    main(sys.argv[1:])
