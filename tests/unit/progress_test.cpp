// Sweep progress: the ETA weights points by their cost (a sweep whose remaining points are
// its largest is not promised early), and the current point is shown as axis=value pairs cut
// at whole pairs to the width there is.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "harness/runtime/progress.hpp"

using namespace fp8lab;

TEST_CASE("progress: the ETA is elapsed time per unit of cost times the cost left") {
  // 10 s for the first 1 unit of cost out of 100: 99 units left at 10 s each.
  CHECK(Progress::eta_seconds(10.0, 1.0, 100.0) == Approx(990.0));
  // The same 10 s after 99 of 100 units: about 0.1 s left, whatever the point count.
  CHECK(Progress::eta_seconds(10.0, 99.0, 100.0) == Approx(10.0 / 99.0));
  CHECK(Progress::eta_seconds(10.0, 0.0, 100.0) < 0);  // nothing done yet: unknown
}

TEST_CASE("progress: the current point as axis=value pairs that fit") {
  const std::vector<std::pair<std::string, std::string>> point = {
      {"layer", "deepseek-v3/expert_up"}, {"gemm", "wgrad"}, {"promotion", "128"}};
  CHECK(Progress::describe(point, 200) == "layer=deepseek-v3/expert_up gemm=wgrad promotion=128");
  // "layer=deepseek-v3/expert_up" is 27 characters; with " gemm=wgrad" 38, and " ..." must fit after it.
  CHECK(Progress::describe(point, 42) == "layer=deepseek-v3/expert_up gemm=wgrad ...");
  CHECK(Progress::describe(point, 41) == "layer=deepseek-v3/expert_up ...");
  CHECK(Progress::describe(point, 10) == "...");
  CHECK(Progress::describe({}, 10).empty());
}

TEST_CASE("progress: a long single computation prints elapsed-time lines to stderr (a file: whole lines)") {
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(capture), STDERR_FILENO);
  {
    const Heartbeat quiet("nothing", /*quiet=*/true, 0.0);
    const Heartbeat beat("gemm 8x8x8", false, /*delay_seconds=*/0.05);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the first line at 0.05 s, the next at 5 s
  }
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::rewind(capture);
  char text[256] = "";
  const std::size_t n = std::fread(text, 1, sizeof text - 1, capture);
  std::fclose(capture);
  CHECK(std::string(text, n) == "fp8lab: gemm 8x8x8: running, elapsed 0:00:00\n");
}
