// Sweep progress: the ETA weights points by their cost (a sweep whose remaining points are
// its largest is not promised early), and the current point is shown as axis=value pairs cut
// at whole pairs to the width there is.
#include <catch2/catch.hpp>

#include "harness/progress.hpp"

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
