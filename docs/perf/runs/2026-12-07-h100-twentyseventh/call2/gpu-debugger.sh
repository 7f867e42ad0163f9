export PATH=/usr/local/cuda/bin:$PATH
cd out/pk3
G=$(command -v gdb || command -v cuda-gdb); echo "debugger: $G"
timeout 120 $G -batch -ex run -ex bt -ex "info threads" --args ./repro_device_vector 2>&1 | grep -v "^\[New Thread\|^\[Thread" | tail -40
