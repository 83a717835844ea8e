#!/usr/bin/env bash
# Issue 17 on the GPU machine, with a healthy FA4 install and fa-doctor on PATH: the static check against its
# floors (python3 -c pass; import typer, rich), interleaved (benchmarks/static_floor.py against this install),
# phase by phase (benchmarks/static_timeline.py), its imports (-X importtime), then the exec/verdict-cache table
# (benchmarks/gpu_verdict_proof.sh). Everything goes to $OUT (default ./gpu-static-proof).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-gpu-static-proof}
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=$(command -v "${PYTHON:-python3}") || { echo "no ${PYTHON:-python3} on PATH" >&2; exit 2; }
{
  nvidia-smi -L
  "$py" -c 'import importlib.metadata as m; print(*(f"{d} {m.version(d)}" for d in ("flash-attn-4", "nvidia-cutlass-dsl", "torch")))'
} > "$out/summary.txt" 2>&1
"$py" "$here/static_floor.py" --runs 21 --python "$py" --out "$out/static_floor.json" > "$out/static_floor.txt" 2>&1
"$py" "$here/static_timeline.py" --runs 15 --python "$py" > "$out/static_timeline.txt" 2>&1
"$py" -X importtime -m fa_doctor check --no-smoke --json --python "$py" > /dev/null 2> "$out/static-importtime.txt"
cat "$out/static_floor.txt" "$out/static_timeline.txt" >> "$out/summary.txt"
OUT="$out/verdict" bash "$here/gpu_verdict_proof.sh" > /dev/null 2>&1
cat "$out/verdict/summary.txt" >> "$out/summary.txt"
cat "$out/summary.txt"
