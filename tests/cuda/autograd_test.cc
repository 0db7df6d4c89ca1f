// Backward across devices: a graph that runs through the CPU, cuda:0 and cuda:1 gives the
// gradients the same graph gives on the CPU alone, each gradient arriving on its leaf's device.
// Gradients cross devices only through the backward of to(), whose copies are ordered on both
// devices' streams; CI also runs this test in the emulator's delay mode, where reading a
// gradient or a saved activation before the stream that produced it has finished gives wrong
// values.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "tests/stream_gate.h"

using namespace ember;

namespace {

struct Leaves {
  Tensor x, w0, w1;
};

// x on `dx`, w0 on `d0`, w1 on `d1`; the ops run where their inputs are.
Tensor forward(const Leaves& l, Device d0, Device d1) {
  Tensor a = l.x.to(d0).matmul(l.w0).tanh();                          // on d0
  Tensor b = (a.to(d1) * l.w1).exp().sum({1});                        // on d1
  Tensor c = b.to(Device(kCPU)) + a.sum({1}).to(Device(kCPU)) * 0.5;  // back on the CPU
  return (c * c).mean();
}

Leaves make_leaves(Device dx, Device d0, Device d1) {
  manual_seed(11);
  Leaves l;
  l.x = randn({7, 5}, TensorOptions(kFloat64)).to(dx).requires_grad_();
  l.w0 = (randn({5, 6}, TensorOptions(kFloat64)) * 0.3).to(d0).requires_grad_();
  l.w1 = (randn({6}, TensorOptions(kFloat64)) * 0.3).to(d1).requires_grad_();
  return l;
}

void check_close(const Tensor& got, const Tensor& want) {
  REQUIRE(got.defined());
  CHECK((got.cpu() - want).abs().amax().item<double>() <= 1e-12 * (1.0 + want.abs().amax().item<double>()));
}

}  // namespace

TEST_CASE("backward through the CPU, cuda:0 and cuda:1 equals the CPU-only graph", "[gpus:2]") {
  REQUIRE(cuda::device_count() >= 2);
  const Device cpu(kCPU), cuda0 = Device::cuda(0), cuda1 = Device::cuda(1);
  Leaves reference = make_leaves(cpu, cpu, cpu);
  forward(reference, cpu, cpu).backward();
  for (int repeat = 0; repeat < 3; ++repeat) {
    Leaves spread = make_leaves(cpu, cuda0, cuda1);
    forward(spread, cuda0, cuda1).backward();
    CHECK(spread.x.grad().device() == cpu);
    CHECK(spread.w0.grad().device() == cuda0);
    CHECK(spread.w1.grad().device() == cuda1);
    check_close(spread.x.grad(), reference.x.grad());
    check_close(spread.w0.grad(), reference.w0.grad());
    check_close(spread.w1.grad(), reference.w1.grad());
  }
}

// Backward kernels run on the caller's current streams; each node makes them wait for the stream
// its forward ran on. Without that wait, the delay mode reads the saved activations before the
// side stream has computed them (a 6.0 error was measured).
TEST_CASE("backward waits for the stream the forward ran on, in either direction", "[gpus:2]") {
  REQUIRE(cuda::device_count() >= 2);
  for (int forward_on_side = 0; forward_on_side <= 1; ++forward_on_side) {
    INFO("forward on the side stream: " << forward_on_side);
    manual_seed(4);
    Tensor w = randn({1 << 16}, TensorOptions(kFloat32).device(Device::cuda(1))).requires_grad_();
    cuda::Stream side = cuda::Stream::create(1);
    Tensor y;
    {
      std::optional<cuda::StreamGuard> on_side;
      if (forward_on_side) on_side.emplace(side);
      y = (w * 3.0).sin().sin();
    }
    {
      std::optional<cuda::StreamGuard> on_side;
      if (!forward_on_side) on_side.emplace(side);
      y.sum().backward();
      cuda::current_stream(1).synchronize();
    }
    Tensor host = w.detach().cpu() * 3.0;
    Tensor expected = host.sin().cos() * host.cos() * 3.0;
    CHECK((w.grad().cpu() - expected).abs().amax().item<float>() <= 1e-5f);
  }
}

// A tensor saved on a side stream and used by a backward on another stream is marked as used
// there, so the caching allocator does not hand its memory to the side stream's next allocation
// while the backward's kernels are still queued. The backward stream is held (a gate) until the
// side stream has written its new allocations: taking the saved tensor's block would overwrite
// it before the backward reads it. The saved tensor is freed by the backward, or with
// retain_graph when the graph is dropped after it.
TEST_CASE("a saved tensor freed after a backward on another stream is not reused before that stream ran") {
  const Device cuda0 = Device::cuda(0);
  const int64_t n = 1 << 16;
  {
    // The kernels below run once before any stream is held: a kernel's first launch may wait for
    // the device's running work (CUDA's lazy loading, the default since CUDA 12.2), which the gate
    // holds back. A real H100 hung here without this.
    Tensor w = randn({n}, TensorOptions(kFloat32).device(cuda0)).requires_grad_();
    ((w * 3.0) * (w * 3.0)).sum().backward();
    Tensor filled = full({n}, 1e6, TensorOptions(kFloat32).device(cuda0));
    cuda::synchronize(0);
  }
  for (bool retain_graph : {false, true}) {
    INFO("retain_graph: " << retain_graph);
    manual_seed(5);
    Tensor x = randn({n}, TensorOptions(kFloat32).device(cuda0)).requires_grad_();
    cuda::synchronize(0);  // the side stream reads x
    cuda::Stream side = cuda::Stream::create(0), backward_stream = cuda::Stream::create(0);
    Tensor loss;
    const char* saved_begin = nullptr;
    {
      cuda::StreamGuard on_side(side);
      Tensor h = x * 3.0;  // allocated on the side stream; h * h saves it, and only the graph keeps it
      saved_begin = static_cast<const char*>(h.data_ptr());
      loss = (h * h).sum();
      side.synchronize();
    }
    const char* saved_end = saved_begin + n * sizeof(float);
    ember::testing::StreamGate gate;
    {
      cuda::StreamGuard on_backward(backward_stream);
      REQUIRE(cudaLaunchHostFunc(backward_stream.handle(), &ember::testing::StreamGate::hold, &gate) == cudaSuccess);
      loss.backward(Tensor(), retain_graph);  // queued behind the gate
      loss = Tensor();                        // frees the saved h if the backward did not
    }
    std::vector<Tensor> side_allocations;
    {
      cuda::StreamGuard on_side(side);
      for (int i = 0; i < 8; ++i) side_allocations.push_back(full({n}, 1e6, TensorOptions(kFloat32).device(cuda0)));
      side.synchronize();
    }
    for (const Tensor& t : side_allocations) {
      const char* begin = static_cast<const char*>(t.data_ptr());
      INFO("a side-stream allocation at offset " << (begin - saved_begin) << " of the saved tensor's block");
      CHECK((begin + n * sizeof(float) <= saved_begin || saved_end <= begin));
    }
    gate.release();
    backward_stream.synchronize();
    Tensor expected = x.detach().cpu() * 18.0;  // d/dx sum((3x)^2)
    CHECK((x.grad().cpu() - expected).abs().amax().item<float>() <= 1e-4f);
  }
}
