#!/usr/bin/env bash
# The per-device path on whatever GPUs the machine has (issue: multi-GPU nodes). Run after the FA4 wheels are
# installed; writes to $OUT (default ./gpu-node-proof). On a 2-GPU machine, 2-all-gpus shows one child per GPU.
set -u
out=${OUT:-gpu-node-proof}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
run() { local name=$1; shift; local t0=$EPOCHREALTIME; "$@" > "$out/$name" 2>&1; local rc=$?
        printf "%s: exit %s in %s s\n" "$name" "$rc" "$(python3 -c "print(round($EPOCHREALTIME - $t0, 1))")" | tee -a "$out/summary.txt"; }
nvidia-smi -L > "$out/summary.txt" 2>&1
run 1-gpus-0.json fa-doctor check --json --gpus 0
run 2-all-gpus.txt fa-doctor check -v
run 3-missing-gpu.txt fa-doctor check --no-smoke --gpus 0,7
run 4-visible-devices.json env CUDA_VISIBLE_DEVICES=0 fa-doctor check --json
run 5-no-cache.json fa-doctor check --json --no-cache
cat "$out/summary.txt"
