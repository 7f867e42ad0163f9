export PATH=/usr/local/cuda/bin:$PATH
cd out/pk3
nvcc -O2 -arch=sm_90 -o freed freed.cu || exit 3
for v in 0 1 2 3; do ./freed $v; echo "rc=$?"; done
