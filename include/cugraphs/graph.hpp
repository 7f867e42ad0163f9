// The umbrella header: the whole cugraphs host API (and, under nvcc, its device helpers).
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/stream.hpp>
#include <cugraphs/memory.hpp>
#include <cugraphs/capture.hpp>
#include <cugraphs/graph_set.hpp>
#include <cugraphs/update.hpp>
#include <cugraphs/cache.hpp>
#include <cugraphs/conditional.hpp>
#include <cugraphs/flatten.hpp>
#include <cugraphs/graphed.hpp>
#include <cugraphs/launch.hpp>
#include <cugraphs/training.hpp>
#include <cugraphs/rng.hpp>
#include <cugraphs/verify.hpp>

#if defined(__CUDACC__)
#  include <cugraphs/detail/kernels.cuh>
#endif
