// profiler::DeviceRange on an emulated GPU: work timed by the device's events on its stream's own
// track, a second stream on another track, ranges that nest as their work does, nothing recorded
// without a session, and nothing for the CPU (its host ranges are its times).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "core/ember_core.h"
#include "core/profiler.h"
#include "cuda/api.h"
#include "tests/trace_checks.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("profiler: device ranges are timed by the device, on their stream's track") {
  REQUIRE(cuda::device_count() >= 1);
  const Device gpu = Device::cuda(0);
  const Tensor a = randn({192, 192}).to(gpu), b = randn({192, 192}).to(gpu);
  (void)a.matmul(b).sum().item<float>();  // warm: the first launch's set-up is not the range's
  profiler::Session session;
  session.start();
  {
    profiler::DeviceRange outer(gpu, "forward", "outer");
    Tensor c = a.matmul(b);
    {
      profiler::DeviceRange inner(gpu, "forward", "inner");
      c = c.matmul(b);
    }
    const Stream side = new_stream(gpu);
    stream_wait(side, current_stream(gpu));
    profiler::DeviceRange other(side, "comm", "on the side stream");
    record_stream(c, side);
  }
  { profiler::DeviceRange cpu(Device(kCPU), "forward", "on the CPU"); }
  const float total = a.matmul(b).sum().item<float>();  // the host reads a result: the device is done
  CHECK(std::isfinite(total));
  session.stop();

  const std::string trace = session.chrome_trace();
  const auto events = parse_trace(trace);
  INFO(malformed(events));
  CHECK(malformed(events).empty());
  const auto names = session.thread_names();
  const TraceEvent *outer = nullptr, *inner = nullptr, *side = nullptr;
  for (const TraceEvent& e : events) {
    if (e.name == "outer") outer = &e;
    if (e.name == "inner") inner = &e;
    if (e.name == "on the side stream") side = &e;
    CHECK(e.name != "on the CPU");
  }
  REQUIRE(outer != nullptr);
  REQUIRE(inner != nullptr);
  REQUIRE(side != nullptr);
  CHECK(names.at(static_cast<size_t>(outer->tid)).rfind("cuda:0 stream ", 0) == 0);
  CHECK(inner->tid == outer->tid);
  CHECK(side->tid != outer->tid);
  CHECK(names.at(static_cast<size_t>(side->tid)).rfind("cuda:0 stream ", 0) == 0);
  CHECK(outer->dur > 0);
  CHECK(inner->dur > 0);
  CHECK(inner->ts >= outer->ts);
  CHECK(inner->end() <= outer->end() + 0.002);
  CHECK(outer->ts >= 0);
}

TEST_CASE("profiler: device ranges outside a session record nothing") {
  REQUIRE(cuda::device_count() >= 1);
  { profiler::DeviceRange idle(Device::cuda(0), "forward", "idle"); }
  profiler::Session session;
  session.start();
  session.stop();
  CHECK(session.events().empty());
}
