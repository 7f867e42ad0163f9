// The engine's view of its particle simulation: plain data and launch functions. Host code
// (main.cpp, compiled by the host compiler alone) calls these; sim.cu, compiled by nvcc,
// defines them with the kernels.
#pragma once

#include <cugraphs/graph.hpp>

#include <cstddef>

namespace sim {

/// Particle state in device memory, structure of arrays, positions in the unit box.
struct Particles {
  float* x;
  float* y;
  float* vx;
  float* vy;
  int n;
};

/// The frame's progress, in device memory: the substep loop reads and writes it.
struct FrameState {
  float t;                      // simulated time reached in this frame
  float h;                      // the current substep's length
  unsigned vmax_bits;           // the largest speed, as float bits (atomicMax on non-negative floats)
  unsigned substeps;            // substeps taken in this frame
  unsigned long long total;     // substeps taken in all frames
  bool more;                    // whether the substep loop runs again
};

/// The step's constants.
struct Config {
  float frame_dt = 1.0f / 60.0f;  // one frame of simulated time
  float cfl = 0.004f;             // the most a particle may move in one substep
  float noise = 2.0f;             // the random forcing's strength
  unsigned max_substeps = 64;     // a frame never takes more
};

/// The While loop's flag: FrameState::more of `state`.
[[nodiscard]] inline const bool* more_flag(const FrameState* state) noexcept {
  return reinterpret_cast<const bool*>(reinterpret_cast<const char*>(state) + offsetof(FrameState, more));
}

/// Starts a frame: t = 0, no substeps yet, the loop flag set, the speed maximum cleared.
void launch_begin_frame(FrameState* state, cudaStream_t s);
/// Pulls every particle towards the attractor `controls` = (x, y, strength), adds random
/// forcing drawn from `rng` (4 values a particle), and records the largest speed.
void launch_forces(Particles p, const float* controls, cugraphs::PhiloxArgs rng, FrameState* state,
                   const Config& config, cudaStream_t s);
/// Chooses the next substep's length from the largest speed (no particle moves more than
/// config.cfl), without passing the end of the frame.
void launch_plan(FrameState* state, const Config& config, cudaStream_t s);
/// Moves every particle by one substep, bouncing off the walls, and records the largest speed.
void launch_substep(Particles p, FrameState* state, cudaStream_t s);
/// Counts the substep and sets FrameState::more: the frame is not done and the cap not reached.
void launch_check(FrameState* state, const Config& config, cudaStream_t s);

}  // namespace sim
