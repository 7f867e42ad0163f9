#!/usr/bin/env bash
# Session 27, call 2: cuRAND reseed diagnostic, the two mended tests (prebuilt), the Thrust
# device_vector repro unbuffered, then the README's commands from this clean copy.
export PATH=/usr/local/cuda/bin:$PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
R=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd out/pk2
./chc >$L/curand_host_capture.log 2>&1; echo "diag rc=$?"; tail -48 $L/curand_host_capture.log
./test_cache >$L/test_cache.log 2>&1; echo "test_cache rc=$?: $(tail -2 $L/test_cache.log | head -1)"
./test_curand -s "*seeded inside a capture*" >$L/test_curand-s.log 2>&1; echo "test_curand seeded rc=$?"; grep -E "seeded inside a|FAILED|with expansion" -A1 $L/test_curand-s.log | cut -c1-400 | head -30
./test_curand >$L/test_curand.log 2>&1; echo "test_curand rc=$?: $(tail -2 $L/test_curand.log | head -1)"
stdbuf -o0 -e0 ./repro_device_vector >$L/repro_device_vector.log 2>&1; echo "repro_device_vector rc=$?"; tail -8 $L/repro_device_vector.log | cut -c1-300
cd $R; rm -rf build
s=$SECONDS; tools/run test >$L/test.log 2>&1; echo "test rc=$? $((SECONDS-s)) s"; grep -E "^(Ok|Fail|Skipped|Timeout):|FAIL" $L/test.log
s=$SECONDS; tools/run demo >$L/demo.log 2>&1; echo "demo rc=$? $((SECONDS-s)) s"; tail -1 $L/demo.log
