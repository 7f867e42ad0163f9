// HostRing (detail/host_ring.hpp) driven through the library's own kernels: the head that
// takes a launch's slot, the tail that counts it done and the staging copy (detail/kernels.cuh,
// reached through the launchers registered in detail/launchers.hpp, as LaunchRing reaches
// them). The kernels run as plain launches on a stream here, not as nodes of a graph, so
// that every step of the protocol (post, publish, launch, launched, withdraw, wait) can be
// taken, or left out, on purpose. A recording kernel of the test's own, launched between
// head and tail, writes down what the head handed each launch.
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/detail/host_ring.hpp>
#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/graph.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

using namespace cugraphs_test;
using cugraphs::DeviceBuffer;
using cugraphs::detail::HostRing;
using cugraphs::detail::RingArgs;
using Word = unsigned long long;

namespace {

// Appends one row for this launch to `log`, at the row `launches` counts: whether the head
// took a slot (control[1]), how many launches had taken one before (control[0]), then the
// generators' words and the staged addresses as the head left them.
__global__ void record_launch(RingArgs a, Word* log, Word* launches) {
  const Word row_words = 2 + 2 * a.generators + a.leaves;
  Word* row = log + (*launches)++ * row_words;
  row[0] = a.control[1];
  row[1] = a.control[0];
  for (unsigned i = 0; i < 2 * a.generators; ++i) row[2 + i] = a.values[i];
  for (unsigned i = 0; i < a.leaves; ++i) row[2 + 2 * a.generators + i] = reinterpret_cast<Word>(a.sources[i]);
}

// A HostRing with the device words a per-launch ring gives its head and tail
// (detail/launch_ring.hpp), and a log of what every launch was handed.
struct Rig {
  unsigned slots, generators, leaves;
  DeviceBuffer<Word> control{2}, values, log, launches{1};
  DeviceBuffer<const void*> sources;
  HostRing ring;  // last: its destructor waits for launches in flight before the device words go

  Rig(unsigned slots_, unsigned generators_, unsigned leaves_, unsigned max_launches)
      : slots(slots_), generators(generators_), leaves(leaves_), values(std::max(2u * generators, 1u)),
        log(max_launches * row_words()), sources(std::max(leaves, 1u)), ring(slots, width(), "test ring") {
    reset_device_words();
  }

  [[nodiscard]] unsigned width() const { return 1 + 2 * generators + leaves; }
  [[nodiscard]] std::size_t row_words() const { return 2 + 2 * generators + leaves; }
  [[nodiscard]] RingArgs args() const {
    return {ring.data(), slots, width(), generators, leaves, values.data(), sources.data(), control.data(), ring.done_word()};
  }

  // As LaunchRing::attach_head does before the first launch, and zero launches recorded.
  void reset_device_words() {
    cugraphs::check(cudaMemset(control.data(), 0, control.bytes()), "clear the control words");
    cugraphs::check(cudaMemset(launches.data(), 0, launches.bytes()), "clear the launch count");
    cugraphs::check(cudaMemset(log.data(), 0xff, log.bytes()), "poison the log");
    // The memsets ran on the legacy default stream, which the tests' streams do not wait for.
    cugraphs::check(cudaDeviceSynchronize(), "wait for the memsets");
  }

  // Waits for the next slot, fills its words and publishes it; returns the slot.
  Word* post(cudaStream_t s, const std::vector<Word>& words) {
    REQUIRE(words.size() == width() - 1);
    Word* slot = ring.next_slot(s, "test ring");
    for (std::size_t i = 0; i < words.size(); ++i) slot[1 + i] = words[i];
    ring.publish(slot);
    return slot;
  }

  // One launch as a graph with a ring runs it: the head, `body` (the graph's own work), the
  // recorder, then the tail.
  template <class Body>
  void launch(cudaStream_t s, Body&& body) {
    const RingArgs a = args();
    const void* head = cugraphs::detail::ring_head_kernel();
    const void* tail = cugraphs::detail::ring_tail_kernel();
    REQUIRE(head != nullptr);  // registered by this nvcc translation unit
    REQUIRE(tail != nullptr);
    RingArgs kernel_args = a;
    void* params[] = {&kernel_args};
    cugraphs::check(cudaLaunchKernel(head, dim3(1), dim3(cugraphs::detail::head_threads(a)), params, 0, s),
                    "launch the ring's head");
    body(a);
    record_launch<<<1, 1, 0, s>>>(a, log.data(), launches.data());
    cugraphs::check_launch("record_launch");
    cugraphs::check(cudaLaunchKernel(tail, dim3(1), dim3(1), params, 0, s), "launch the ring's tail");
  }
  void launch(cudaStream_t s) {
    launch(s, [](const RingArgs&) {});
  }

  // A post, its launch and the ring told so.
  void post_and_launch(cudaStream_t s, const std::vector<Word>& words) {
    (void)post(s, words);
    launch(s);
    ring.launched(s);
  }

  // The rows recorded so far (waits for the device).
  [[nodiscard]] std::vector<std::vector<Word>> rows() const {
    const Word count = host(launches)[0];
    const auto all = host(log);
    std::vector<std::vector<Word>> out;
    for (Word r = 0; r < count; ++r)
      out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(r * row_words()),
                       all.begin() + static_cast<std::ptrdiff_t>((r + 1) * row_words()));
    return out;
  }
  // The device's count of launches that took a slot, from the device and from the ring's
  // pinned word, after the device has finished.
  [[nodiscard]] Word taken_on_device() const { return host(control)[0]; }
  [[nodiscard]] Word done_word() const {
    cugraphs::check(cudaDeviceSynchronize(), "wait for the device");
    return *ring.done_word();
  }
};

// Post k's words: distinct in every word and every post, never zero.
std::vector<Word> words_of(std::uint64_t k, std::size_t n) {
  std::vector<Word> w(n);
  for (std::size_t i = 0; i < n; ++i) w[i] = 0x9E3779B97F4A7C15ull * (k + 1) ^ (0x1000 + i);
  return w;
}

// What record_launch writes for a launch that took post k's words as the launch `taken`.
std::vector<Word> row_taking(std::uint64_t taken, const std::vector<Word>& words) {
  std::vector<Word> row{1, taken};
  row.insert(row.end(), words.begin(), words.end());
  return row;
}

}  // namespace

TEST_CASE("HostRing: each launch's head takes exactly the words posted for it, in order, through more posts than "
          "slots, with the host waiting for slots behind a busy stream; the tail counts each launch on the device "
          "and in the ring's done word",
          "[host_ring][gpu]") {
  // 3 generators and 40 staged leaves: 46 words a slot, read by a head of 64 threads.
  Rig rig(4, 3, 40, 16);
  REQUIRE(cugraphs::detail::head_threads(rig.args()) == 64);
  cugraphs::Stream s;
  constexpr std::uint64_t kPosts = 13;  // three times round the ring, and one more
  const auto t0 = std::chrono::steady_clock::now();
  slow_fill_kernel<<<1, kThreads, 0, s>>>(nullptr, 0, 0.0f, 50'000'000);  // holds the first launch back 50 ms
  for (std::uint64_t k = 0; k < kPosts; ++k) rig.post_and_launch(s, words_of(k, rig.width() - 1));
  // The fifth post needed the first launch's slot, which its tail frees after the 50 ms.
  CHECK(seconds_since(t0) >= 0.045);

  const auto rows = rig.rows();
  REQUIRE(rows.size() == kPosts);
  for (std::uint64_t k = 0; k < kPosts; ++k) {
    INFO("launch " << k);
    CHECK(rows[k] == row_taking(k, words_of(k, rig.width() - 1)));
  }
  CHECK(rig.taken_on_device() == kPosts);
  CHECK(rig.done_word() == kPosts);
  CHECK(rig.ring.posted() == kPosts);
}

TEST_CASE("HostRing: a launch with nothing posted takes nothing: it keeps the last generator words, stages nothing "
          "and is not counted; a post with a null address is taken and stages nothing; the staging copy copies "
          "each posted input onto its target",
          "[host_ring][gpu]") {
  constexpr std::size_t n = 1003;  // 4,012 bytes: 250 vectors of 16 bytes and 12 bytes more
  Rig rig(4, 1, 1, 8);
  cugraphs::Stream s;
  auto a = filled(n, 11), b = filled(n, 12);
  DeviceBuffer<float> target(n);
  const cugraphs::detail::StageTarget t{target.data(), n * sizeof(float)};
  DeviceBuffer<cugraphs::detail::StageTarget> targets(1);
  put(targets, t);
  const std::vector<float> poison(n, -333.5f);
  // One launch: the staging copy between head and tail, as a graphed callable captures it.
  auto launch = [&] {
    rig.launch(s, [&](const RingArgs& ra) {
      const cugraphs::detail::StageArgs stage{targets.data(), ra.sources, ra.control, 1, 2, {}};
      cugraphs::detail::launch_stage(stage, s, "test ring");
    });
  };
  auto words = [](Word seed, const void* source) {
    return std::vector<Word>{seed, seed ^ 0xABCDull, reinterpret_cast<Word>(source)};
  };

  target.copy_from_host(poison);
  (void)rig.post(s, words(101, a.data()));
  launch();
  rig.ring.launched(s);
  CHECK(host(target) == host(a));

  target.copy_from_host(poison);
  launch();  // nothing posted: as an executable launched outside cugraphs
  CHECK(host(target) == poison);

  (void)rig.post(s, words(202, nullptr));  // an aliased input: nothing to copy
  launch();
  rig.ring.launched(s);
  CHECK(host(target) == poison);

  (void)rig.post(s, words(303, b.data()));
  launch();
  rig.ring.launched(s);
  CHECK(host(target) == host(b));

  const auto rows = rig.rows();
  REQUIRE(rows.size() == 4);
  CHECK(rows[0] == row_taking(0, words(101, a.data())));
  // Not taken: the control words say so, the generator's words and the address stay.
  CHECK(rows[1] == std::vector<Word>{0, 1, 101, 101 ^ 0xABCDull, reinterpret_cast<Word>(a.data())});
  CHECK(rows[2] == row_taking(1, words(202, nullptr)));
  CHECK(rows[3] == row_taking(2, words(303, b.data())));
  CHECK(rig.taken_on_device() == 3);
  CHECK(rig.done_word() == 3);
  CHECK(rig.ring.posted() == 3);
}

TEST_CASE("HostRing: withdraw takes back a post whose launch failed: a launch after it takes nothing, and the next "
          "post, in the same slot, is taken with its own words",
          "[host_ring][gpu]") {
  Rig rig(4, 1, 0, 8);
  cugraphs::Stream s;
  rig.post_and_launch(s, {11, 12});
  Word* withdrawn = rig.post(s, {21, 22});
  rig.ring.withdraw();  // its launch failed: never launched(), and the tag is gone
  rig.launch(s);        // a launch of the executable with nothing posted for it
  // It must have run before the next post: a launch queued earlier that runs later takes
  // whatever is posted by then (the ring pairs posts with launches in device order).
  cugraphs::check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  Word* again = rig.post(s, {31, 32});
  CHECK(again == withdrawn);
  rig.launch(s);
  rig.ring.launched(s);

  const auto rows = rig.rows();
  REQUIRE(rows.size() == 3);
  CHECK(rows[0] == row_taking(0, {11, 12}));
  CHECK(rows[1] == std::vector<Word>{0, 1, 11, 12});
  CHECK(rows[2] == row_taking(1, {31, 32}));
  CHECK(rig.done_word() == 2);
  CHECK(rig.ring.posted() == 2);
}

TEST_CASE("HostRing: posts that no launch takes end the wait with an Error once their stream is idle, not a hang; a "
          "busy stream is waited for; the ring works on afterwards",
          "[host_ring][faults][gpu]") {
  // A launch lost (as a tool running the program may do) leaves a post that no later
  // launch takes: CUDA runs one executable's launches in order. The waits of
  // GraphedCallable and of RNG replays are HostRing's; here its posts are taken, or not,
  // by the ring's own head and tail.
  constexpr unsigned kSlots = 4;
  Rig rig(kSlots, 1, 0, 64);
  HostRing& ring = rig.ring;
  cugraphs::Stream s;
  Word taken = 0;  // posts the head has taken, as the device counts them
  // Posts `value` on `on`, and launches the head and tail that take it when `launch`.
  auto post_on = [&](cudaStream_t on, Word value, bool launch) {
    (void)rig.post(on, {value, ~value});
    if (launch) {
      rig.launch(on);
      ++taken;
    }
    ring.launched(on);
  };
  auto post = [&](Word value, bool launch) { post_on(s, value, launch); };
  // The device's count of posts taken, and the last value taken.
  auto device_state = [&] { return std::vector<Word>{rig.taken_on_device(), host(rig.values)[0]}; };

  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    // A full ring whose posts no kernel takes: the next post fails, naming the cause.
    for (unsigned i = 0; i < kSlots; ++i) post(1000 + i, false);
    const auto t0 = std::chrono::steady_clock::now();
    const auto e = expect_error([&] { post(2000, false); });
    CHECK(seconds_since(t0) < 5.0);
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "test ring: 4 posted launches were never taken by the device"));
    CHECK(contains(e.what(), "although the stream of the last launch has finished its work"));
    CHECK(contains(e.what(), "a launch was lost"));
    CHECK(ring.posted() == taken);  // the posts were given up: counting goes on from the device's count

    // The ring works on: posts taken by the head, more than its slots, behind 50 ms of
    // other work so that the host waits for slots on a busy stream, which is no error.
    slow_fill_kernel<<<1, kThreads, 0, s>>>(nullptr, 0, 0.0f, 50'000'000);
    for (unsigned i = 0; i < 3 * kSlots; ++i) post(100 + i, true);
    CHECK(device_state() == std::vector<Word>{taken, 100 + 3 * kSlots - 1});
    CHECK(ring.posted() == taken);

    // wait_all (every owner's destructor) returns when posts are left untaken, and gives
    // them up; then one more post is taken as usual.
    post(7, false);
    post(8, false);
    const auto t1 = std::chrono::steady_clock::now();
    ring.wait_all("test ring: waiting before the test goes on");
    CHECK(seconds_since(t1) < 5.0);
    CHECK(ring.posted() == taken);
    post(9, true);
    CHECK(device_state() == std::vector<Word>{taken, 9});
  }

  // wait_all does not ask the last launch's stream, which its owner may have destroyed:
  // here one post is taken on a stream destroyed before the wait, and one is left untaken.
  {
    auto gone = std::make_unique<cugraphs::Stream>();
    slow_fill_kernel<<<1, kThreads, 0, *gone>>>(nullptr, 0, 0.0f, 20'000'000);  // the take runs after it
    post_on(*gone, 41, true);
    post_on(*gone, 42, false);
    gone.reset();  // its work still runs; the handle is gone
    ring.wait_all("test ring: waiting after the stream was destroyed");
    CHECK(ring.posted() == taken);  // the untaken post was given up, the taken one counted
    CHECK(device_state() == std::vector<Word>{taken, 41});
    post(43, true);
    CHECK(device_state() == std::vector<Word>{taken, 43});
  }
}

TEST_CASE("HostRing: a moved ring carries its slots and count on and the moved-from ring is empty; assigning over a "
          "ring waits for its launches in flight before freeing it",
          "[host_ring][gpu]") {
  Rig rig(4, 1, 0, 8);
  cugraphs::Stream s;
  rig.post_and_launch(s, {1, 2});
  rig.post_and_launch(s, {3, 4});
  const Word* slots = rig.ring.data();

  HostRing moved(std::move(rig.ring));
  CHECK_FALSE(static_cast<bool>(rig.ring));
  CHECK(moved.data() == slots);  // the same pinned words: the device's arguments stay valid
  CHECK(moved.posted() == 2);
  rig.ring = std::move(moved);  // back, for the rig's launches
  CHECK(rig.ring.posted() == 2);
  rig.post_and_launch(s, {5, 6});
  CHECK(rig.rows().back() == row_taking(2, {5, 6}));
  CHECK(rig.done_word() == 3);

  // A launch in flight behind 50 ms of other work when a fresh ring is assigned over this
  // one: the assignment waits for it (it reads and writes the old ring's words) first.
  slow_fill_kernel<<<1, kThreads, 0, s>>>(nullptr, 0, 0.0f, 50'000'000);
  rig.post_and_launch(s, {7, 8});
  const auto t0 = std::chrono::steady_clock::now();
  rig.ring = HostRing(rig.slots, rig.width(), "fresh test ring");
  CHECK(seconds_since(t0) >= 0.045);
  CHECK(rig.rows().back() == row_taking(3, {7, 8}));

  // The fresh ring starts from zero, with its device words zeroed as attach_head does.
  CHECK(rig.ring.posted() == 0);
  rig.reset_device_words();
  rig.post_and_launch(s, {9, 10});
  const auto rows = rig.rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0] == row_taking(0, {9, 10}));
  CHECK(rig.done_word() == 1);
}
