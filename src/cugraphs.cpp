// The compiled part of cugraphs: the bodies of the library's non-template host functions
// (include/cugraphs/impl/*.ipp), built once by the host compiler when
// CUGRAPHS_SEPARATE_COMPILATION is defined, which the Meson dependency does for the library
// and for every translation unit that uses it. The library's kernels stay in the headers:
// nvcc compiles them into the program's own CUDA translation units (detail/launchers.hpp).
#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  error "src/cugraphs.cpp is cugraphs' compiled part: build it with -DCUGRAPHS_SEPARATE_COMPILATION"
#endif

#include <cugraphs/graph.hpp>

namespace cugraphs::detail {
// Every translation unit compiled in separate mode names the tags of its exception setting
// and of its default stream (config.hpp chooses them); this library defines the ones it was
// built with, so a program that mixes settings fails to link instead of going wrong quietly.
extern const int CUGRAPHS_DETAIL_EXCEPTIONS_TAG = 1;
extern const int CUGRAPHS_DETAIL_STREAM_TAG = 1;
}  // namespace cugraphs::detail

#include <cugraphs/impl/argument_sites.ipp>
#include <cugraphs/impl/block_allocator.ipp>
#include <cugraphs/impl/buffer_registry.ipp>
#include <cugraphs/impl/capture.ipp>
#include <cugraphs/impl/capture_options.ipp>
#include <cugraphs/impl/capture_scope.ipp>
#include <cugraphs/impl/capture_session.ipp>
#include <cugraphs/impl/conditional_frames.ipp>
#include <cugraphs/impl/deferred_frees.ipp>
#include <cugraphs/impl/device.ipp>
#include <cugraphs/impl/driver_log.ipp>
#include <cugraphs/impl/error.ipp>
#include <cugraphs/impl/escape_guard.ipp>
#include <cugraphs/impl/executable.ipp>
#include <cugraphs/impl/graph_queries.ipp>
#include <cugraphs/impl/graph_set.ipp>
#include <cugraphs/impl/graphed.ipp>
#include <cugraphs/impl/host_ring.ipp>
#include <cugraphs/impl/kernel_args.ipp>
#include <cugraphs/impl/launch.ipp>
#include <cugraphs/impl/launch_ring.ipp>
#include <cugraphs/impl/launchers.ipp>
#include <cugraphs/impl/memory.ipp>
#include <cugraphs/impl/native_graph.ipp>
#include <cugraphs/impl/pause.ipp>
#include <cugraphs/impl/pool.ipp>
#include <cugraphs/impl/pool_checks.ipp>
#include <cugraphs/impl/rng.ipp>
#include <cugraphs/impl/session_api.ipp>
#include <cugraphs/impl/staging.ipp>
#include <cugraphs/impl/stream.ipp>
#include <cugraphs/impl/update.ipp>
#include <cugraphs/impl/verify.ipp>
