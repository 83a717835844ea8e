#!/usr/bin/env bash
# GPU proof of the result/renderer layer, exec, fix, explain and the hardening (signals, cache identity), run on
# the H200 machine after the FA4 wheels are installed (../shared/gpu/stage-fa4-wheels.sh) and the project with
# `pip install --no-deps -e .`. Writes each output to $OUT (default ./gpu-proof) and a summary line per step;
# the device tool brings back 8 files at most, so everything is also packed into $OUT/proof.tgz.
# SKIP="2 10 11" leaves those steps out.
set -u
final=${OUT:-gpu-proof}
out=$(mktemp -d)
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
sum="$out/summary.txt"
run() { local name=$1; shift; case " ${SKIP:-} " in *" ${name%%-*} "*) return;; esac; local t0=$EPOCHREALTIME; "$@" > "$out/$name" 2>&1; local rc=$?
        printf "%s: exit %s in %s s\n" "$name" "$rc" "$("$py" -c "print(round($EPOCHREALTIME - $t0, 1))")" | tee -a "$sum"; }
gpu_apps() { nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader; }
nvidia-smi -L > "$sum" 2>&1
# 1-2: the check through the new layer, cold then warm; one run writes every CI artifact.
run 1-cold.txt fa-doctor check -v
run 2-warm.json fa-doctor check --json --junit-xml "$out/2-warm.junit.xml" --markdown "$out/2-warm.md"
# 3: a warm cache must not hide what CUTE_DSL_ARCH does to the kernels (it must fail, as a server would).
run 3-arch-sm100a.json env CUTE_DSL_ARCH=sm_100a fa-doctor check --json
# 4: exec: the same PID becomes the server, its argv untouched, its exit code its own.
cat > /tmp/server.py <<'EOF'
import os, sys
print("server pid", os.getpid(), "argv", sys.argv[1:], "override", os.environ.get("SGLANG_FLASHATTENTION_VERSION"))
sys.exit(7)
EOF
exec_proof() { fa-doctor exec --unset-override -- "$py" /tmp/server.py --json --port=1 & local p=$!; wait $p; local rc=$?
               echo "launcher pid $p, exit $rc"; }
run 4-exec.txt env SGLANG_FLASHATTENTION_VERSION=5 bash -c "$(declare -f exec_proof); py=$py; exec_proof"
# 5-7: signals while the smoke child compiles on the GPU: no orphan may hold the GPU afterwards.
signal_proof() { local sig=$1; fa-doctor check --no-cache --json > /tmp/sig.json 2>/tmp/sig.err & local p=$!
                 sleep 14; echo "GPU apps before: $(gpu_apps | tr '\n' ';')"; kill -"$sig" $p; wait $p; echo "exit $?"
                 sleep 2; echo "GPU apps after: [$(gpu_apps | tr '\n' ';')]"
                 "$py" -c "import json; d=json.load(open('/tmp/sig.json')); print('json error:', d['error'], d['exit_code'])"
                 tail -1 /tmp/sig.err; }
run 5-sigterm.txt bash -c "$(declare -f signal_proof gpu_apps); py=$py; signal_proof TERM"
run 6-sigint.txt bash -c "$(declare -f signal_proof gpu_apps); py=$py; signal_proof INT"
timeout_proof() { timeout 12 fa-doctor check --no-cache; echo "exit $?"; sleep 2; echo "GPU apps after: [$(gpu_apps)]"; }
run 7-timeout.txt bash -c "$(declare -f timeout_proof gpu_apps); timeout_proof"
# 8: explain with the target's versions.
run 8-explain.json fa-doctor explain --json --python "$(command -v "$py")" \
  "ImportError: /x/flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
# 9: the static inspection on the real libtorch_cuda (a real, large .nv_fatbin) and the formats on the GPU host.
run 9-binary.txt "$py" - <<'EOF'
import glob, os, resource, time, torch
from fa_doctor.probes.elf import read_elf
from fa_doctor.probes.fatbin import read_fatbin
for path in sorted(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "*.so*"))):
    if os.path.getsize(path) < 50 << 20:
        continue
    t0 = time.perf_counter(); elf = read_elf(path); fb = read_fatbin(elf); dt = time.perf_counter() - t0
    print(f"{os.path.basename(path)}: {os.path.getsize(path) / 2**20:.0f} MiB, {dt * 1000:.1f} ms, "
          f"{fb.entries} entries ({fb.compressed} compressed), cubins {dict(fb.cubins)}, ptx {dict(fb.ptx)}, "
          f"error {fb.error}")
print("max RSS MiB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
EOF
run 10-github.txt fa-doctor check --no-smoke --format github
# 11-13: a broken install, the plan, and --apply with no index reachable (must leave the environment as it was).
case " ${SKIP:-} " in *" 11 "*) ;; *) "$py" -m pip uninstall -y -q nvidia-cutlass-dsl-libs-core >> "$sum" 2>&1;; esac
run 11-broken.txt fa-doctor check -v
run 12-plan.txt fa-doctor fix --no-smoke
run 13-apply-offline.json fa-doctor fix --apply --yes --no-smoke --json
"$py" -m pip list 2>/dev/null | grep -i cutlass >> "$sum"
mkdir -p "$final" && tar czf "$final/proof.tgz" -C "$out" . && cp "$sum" "$final/summary.txt"
cat "$sum"
