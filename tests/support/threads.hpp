// Running test work on several threads. Catch2's assertions are not thread-safe: worker
// threads never use them. They throw (expect() below), run_workers collects every failure,
// and the main thread asserts after joining (require_no_failures).
#pragma once

#include "testing.hpp"

#include <cugraphs/error.hpp>
#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cugraphs_test {

// A reusable barrier: all `count` workers arrive, then all go on. A failing worker breaks
// it and a wait that lasts a minute fails, so a dead thread never hangs the test.
class Barrier {
public:
  explicit Barrier(int count) : count_(count) {}

  [[nodiscard]] int count() const noexcept { return count_; }

  void arrive_and_wait() {
    std::unique_lock lock(m_);
    if (broken_) throw std::runtime_error("stopped because another worker failed");
    const std::uint64_t phase = phase_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++phase_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return phase_ != phase || broken_; }))
      throw std::runtime_error("waited 60 s at a barrier for the other workers");
    if (phase_ == phase) throw std::runtime_error("stopped because another worker failed");
  }

  void break_all() {
    std::lock_guard lock(m_);
    broken_ = true;
    cv_.notify_all();
  }

private:
  std::mutex m_;
  std::condition_variable cv_;
  const int count_;
  int arrived_ = 0;
  std::uint64_t phase_ = 0;
  bool broken_ = false;
};

// Runs work(t) for t in [0, barrier.count()) on as many threads, released together by
// `barrier` so that they really overlap. Returns the failures, "thread t: what", for the
// main thread.
template <class Work>
std::vector<std::string> run_workers(Barrier& barrier, Work&& work) {
  std::mutex m;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(barrier.count()));
  for (int t = 0; t < barrier.count(); ++t)
    threads.emplace_back([&, t] {
      std::string failure;
      try {
        barrier.arrive_and_wait();
        work(t);
      } catch (const std::exception& e) {
        failure = e.what();
      } catch (...) {
        failure = "an exception that is not a std::exception";
      }
      if (failure.empty()) return;
      barrier.break_all();
      std::lock_guard lock(m);
      failures.push_back(fmt::format("thread {}: {}", t, failure));
    });
  for (auto& thread : threads) thread.join();
  return failures;
}

// On the main thread: every worker's failure in the report, and none allowed.
inline void require_no_failures(const std::vector<std::string>& failures) {
  std::string all;
  for (const auto& f : failures) all += f + "\n";
  INFO(all);
  REQUIRE(failures.empty());
}

// A check on a worker thread: throws, and run_workers reports it on the main thread.
template <class... A>
void expect(bool ok, fmt::format_string<A...> what, A&&... args) {
  if (!ok) throw std::runtime_error(fmt::format(what, std::forward<A>(args)...));
}

// Runs `fn` on a new thread and returns the message of the cugraphs::Error it threw there,
// or "" when it threw none.
template <class F>
std::string error_on_another_thread(F&& fn) {
  std::string message;
  std::thread([&] {
    try {
      fn();
    } catch (const cugraphs::Error& e) {
      message = e.what();
    }
  }).join();
  return message;
}

}  // namespace cugraphs_test
