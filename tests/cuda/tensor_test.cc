// Tensors on CUDA devices through the library: factories, random numbers equal to the CPU's,
// printing and item(), copies between the CPU, cuda:0 and cuda:1 on two streams ordered by events,
// pinned memory and non_blocking copies, host scalars, device errors, memory statistics,
// Module::to, the fused optimizers, and checkpoints loaded onto a device. Each is checked against
// the CPU backend. Runs on two emulated devices in CI and as a gpu target on real ones.
#include <cstdlib>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "nn/checkpoint.h"
#include "nn/nn.h"
#include "nn/optim/optim.h"

using namespace ember;
using Catch::Matchers::Contains;

namespace {

const Device kCpu(kCPU);
const Device kCuda0 = Device::cuda(0);
const Device kCuda1 = Device::cuda(1);

// Exact equality of two tensors' values (on any devices), element by element through the CPU.
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  std::vector<double> x = a.cpu().to(kFloat64).contiguous().to_vector<double>();
  std::vector<double> y = b.cpu().to(kFloat64).contiguous().to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i] || (x[i] != x[i] && y[i] != y[i]))) return false;
  return true;
}

std::string temp_path(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base ? base : "/tmp") + "/" + name;
}

}  // namespace

TEST_CASE("two CUDA devices exist and the backend is registered", "[gpus:2]") {
  REQUIRE(cuda::is_available());
  REQUIRE(cuda::device_count() >= 2);
  CHECK(has_backend(kCUDA));
}

TEST_CASE("factories, printing and item on cuda:0") {
  Tensor z = zeros({2, 3}, TensorOptions(kFloat32).device(kCuda0));
  CHECK(z.device() == kCuda0);
  CHECK(same_values(z, zeros({2, 3})));
  Tensor r = arange(0, 6, 1, TensorOptions(kInt64).device(kCuda0)).view({2, 3});
  CHECK(r.device() == kCuda0);
  CHECK(r.sum().item<int64_t>() == 15);
  std::ostringstream text;
  text << r;
  CHECK_THAT(text.str(), Contains("cuda:0"));
  CHECK_THAT(text.str(), Contains("5"));
}

TEST_CASE("random fills on cuda:0 draw the CPU's numbers for the same seed") {
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    manual_seed(123);
    Tensor host = randn({1001}, TensorOptions(dtype));
    Tensor u_host = rand({77}, TensorOptions(dtype));
    manual_seed(123);
    Tensor device = randn({1001}, TensorOptions(dtype).device(kCuda0));
    Tensor u_device = rand({77}, TensorOptions(dtype).device(kCuda0));
    INFO(dtype_name(dtype));
    CHECK(same_values(host, device));
    CHECK(same_values(u_host, u_device));
  }
  manual_seed(9);
  Tensor big = randint(-(int64_t(1) << 60), int64_t(1) << 60, {513}, TensorOptions(kInt64));
  manual_seed(9);
  Tensor big_device = randint(-(int64_t(1) << 60), int64_t(1) << 60, {513}, TensorOptions(kInt64).device(kCuda0));
  CHECK(same_values(big, big_device));
  Tensor dropout_mask = bernoulli(full({300}, 0.3, TensorOptions(kFloat32).device(kCuda0)));
  CHECK(dropout_mask.device() == kCuda0);
}

TEST_CASE("copies between the CPU, cuda:0 and cuda:1 keep values, layouts and dtypes", "[gpus:2]") {
  manual_seed(5);
  Tensor host = randn({7, 5, 3});
  Tensor a = host.to(kCuda0);
  Tensor b = a.transpose(0, 2).to(kCuda1);  // non-contiguous source, peer copy
  CHECK(b.device() == kCuda1);
  CHECK(same_values(b, host.transpose(0, 2)));
  Tensor c = b.to(kFloat64).to(kCpu);
  CHECK(same_values(c, host.transpose(0, 2).to(kFloat64)));
  // Into a strided destination on the other device, with a cast.
  Tensor dst = zeros({5, 14}, TensorOptions(kFloat64).device(kCuda1)).slice(1, 0, 14, 2);
  dst.copy_(host.select(2, 1).t().to(kCuda0));
  CHECK(same_values(dst, host.select(2, 1).t().to(kFloat64)));
}

TEST_CASE("same-device copies: contiguous in 16-byte chunks with a tail, misaligned and strided element-wise") {
  manual_seed(21);
  for (DType dtype : {kUInt8, kFloat16, kFloat32, kFloat64}) {
    for (int64_t n : {1, 7, 15, 16, 17, 33, 4099}) {
      INFO(dtype_name(dtype) << " x " << n);
      Tensor host = randint(0, 100, {n + 1}, TensorOptions(kInt64)).to(dtype);
      Tensor source = host.to(kCuda0);
      Tensor whole = empty({n + 1}, source.options());
      whole.copy_(source);  // both aligned: chunks and a tail of (n + 1) * size % 16 bytes
      CHECK(same_values(whole, host));
      Tensor shifted = zeros({n + 1}, source.options());
      shifted.slice(0, 1, n + 1).copy_(source.slice(0, 0, n));  // destination off alignment
      CHECK(same_values(shifted.slice(0, 1, n + 1), host.slice(0, 0, n)));
      CHECK(same_values(shifted.slice(0, 0, 1), zeros({1}, TensorOptions(dtype))));
      Tensor strided = source.slice(0, 0, n + 1, 2).contiguous();
      CHECK(same_values(strided, host.slice(0, 0, n + 1, 2)));
    }
  }
}

TEST_CASE("work on two streams is ordered by events, across devices", "[gpus:2]") {
  cuda::Stream producer = cuda::Stream::create(0);
  cuda::Stream consumer = cuda::Stream::create(1);
  Tensor source, result;
  {
    cuda::StreamGuard on(producer);
    source = full({4096}, 3.0, TensorOptions(kFloat32).device(kCuda0));
    source.mul_(2.0);
  }
  cuda::Event made;
  made.record(producer);
  {
    cuda::StreamGuard on(consumer);
    consumer.wait(made);
    cuda::record_stream(source, cuda::current_stream(0));
    result = source.to(kCuda1) + 1.0;
  }
  consumer.synchronize();
  CHECK(same_values(result, full({4096}, 7.0)));
  CHECK(cuda::current_stream(0) == cuda::Stream::default_stream(0));
  CHECK(cuda::current_stream(1) == cuda::Stream::default_stream(1));
}

TEST_CASE("timing events measure the time between them") {
  cuda::Event start(true), end(true);
  start.record();
  Tensor x = randn({1 << 16}, TensorOptions(kFloat32).device(kCuda0)).exp().sum();
  end.record();
  end.synchronize();
  CHECK(start.query());
  CHECK(start.elapsed_ms(end) >= 0.0f);
  cuda::Event untimed;
  untimed.record();
  CHECK_THROWS_WITH(untimed.elapsed_ms(end), Contains("enable_timing"));
}

TEST_CASE("pinned memory and non_blocking copies") {
  Tensor host = arange(0, 10000, 1, TensorOptions(kFloat32));
  Tensor pinned = host.pin_memory();
  CHECK(pinned.is_pinned());
  CHECK_FALSE(host.is_pinned());
  CHECK(same_values(pinned, host));
  Tensor device = pinned.to(kCuda0, /*non_blocking=*/true);
  Tensor back = empty({10000}, TensorOptions(kFloat32)).pin_memory();
  back.copy_(device * 2.0, /*non_blocking=*/true);
  cuda::synchronize(0);
  CHECK(same_values(back, host * 2.0));
  // The pinned source may die while its copy is still queued.
  Tensor later;
  {
    Tensor temporary = full({50000}, 4.0, TensorOptions(kFloat32)).pin_memory();
    later = temporary.to(kCuda0, true);
  }
  CHECK(same_values(later, full({50000}, 4.0)));
  CHECK_THROWS_WITH(device.pin_memory(), Contains("expected a CPU tensor"));
}

TEST_CASE("scalar operands stay on the host") {
  Tensor x = full({1000}, 2.0, TensorOptions(kFloat32).device(kCuda0));
  cuda::synchronize(0);
  const int64_t before = cuda::memory_stats(0).allocations;
  Tensor y = x * 0.5 + 3.0;  // two outputs; no device tensor for either scalar
  CHECK(cuda::memory_stats(0).allocations - before == 2);
  CHECK(same_values(y, full({1000}, 4.0)));
  Tensor w = where(x > full({}, 1.0, TensorOptions(kFloat32)), x,
                   zeros({}, TensorOptions(kFloat32)));  // a 0-dim CPU tensor joins too
  CHECK(same_values(w, full({1000}, 2.0)));
  x.add_(1.0);
  CHECK(same_values(x, full({1000}, 3.0)));
}

TEST_CASE("device errors name the op, the devices and the argument", "[gpus:2]") {
  Tensor x = ones({3}, TensorOptions(kFloat32).device(kCuda0));
  CHECK_THROWS_WITH(x + ones({3}), Contains("add: expected all tensors on cuda:0, got cpu for argument 2"));
  CHECK_THROWS_WITH(x + ones({3}, TensorOptions(kFloat32).device(kCuda1)),
                    Contains("expected all tensors on cuda:0, got cuda:1 for argument 2"));
  CHECK_THROWS_WITH(ones({3}) * x, Contains("mul: expected all tensors on cpu, got cuda:0 for argument 2"));
  CHECK_THROWS_WITH(zeros({2}, TensorOptions(kFloat32).device(Device::cuda(7))),
                    Contains("cuda:7 does not exist") && Contains("available"));
  CHECK_THROWS_WITH(cuda::set_device(9), Contains("cuda:9 does not exist"));
  CHECK_THROWS_WITH(x.view({1, 3}).matmul(ones({3, 2}, TensorOptions(kFloat32).device(kCuda1))),
                    Contains("matmul: expected all tensors on cuda:0, got cuda:1 for argument 2"));
}

TEST_CASE("memory statistics follow tensors, and empty_cache returns cached segments") {
  cuda::synchronize(0);
  cuda::empty_cache();
  const cuda::MemoryStats before = cuda::memory_stats(0);
  {
    Tensor big = empty({4 << 20}, TensorOptions(kFloat32).device(kCuda0));  // 16 MB
    CHECK(cuda::memory_stats(0).allocated_bytes - before.allocated_bytes >= (16 << 20));
  }
  const cuda::MemoryStats after = cuda::memory_stats(0);
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.reserved_bytes > before.reserved_bytes);  // cached for reuse
  CHECK(after.peak_allocated_bytes >= before.allocated_bytes + (16 << 20));
  cuda::empty_cache();
  CHECK(cuda::memory_stats(0).reserved_bytes == before.reserved_bytes);
}

TEST_CASE("Module::to moves parameters and buffers, and the fused optimizers match the CPU to the bit") {
  for (int kind = 0; kind < 3; ++kind) {
    manual_seed(17);
    auto cpu_model = nn::Sequential(nn::Linear(13, 9), nn::BatchNorm1d(9)).ptr();
    manual_seed(17);
    auto gpu_model = nn::Sequential(nn::Linear(13, 9), nn::BatchNorm1d(9)).ptr();
    gpu_model->to(kCuda0);
    for (const Tensor& p : gpu_model->parameters()) CHECK(p.device() == kCuda0);
    for (const Tensor& b : gpu_model->buffers()) CHECK(b.device() == kCuda0);
    auto make = [kind](std::vector<Tensor> params) -> std::unique_ptr<optim::Optimizer> {
      if (kind == 0)
        return std::make_unique<optim::SGD>(params,
                                            optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(1e-2));
      if (kind == 1) return std::make_unique<optim::Adam>(params, optim::AdamOptions(1e-2).amsgrad(true));
      return std::make_unique<optim::AdamW>(params, optim::AdamWOptions(1e-2).weight_decay(0.1));
    };
    auto cpu_opt = make(cpu_model->parameters());
    auto gpu_opt = make(gpu_model->parameters());
    for (int step = 0; step < 3; ++step) {
      manual_seed(100 + step);
      auto cpu_params = cpu_model->parameters(), gpu_params = gpu_model->parameters();
      for (size_t i = 0; i < cpu_params.size(); ++i) {
        Tensor g = randn(cpu_params[i].sizes());
        cpu_params[i].mutable_grad() = g;
        gpu_params[i].mutable_grad() = g.to(kCuda0);
      }
      cpu_opt->step();
      gpu_opt->step();
    }
    auto cpu_params = cpu_model->parameters(), gpu_params = gpu_model->parameters();
    INFO("optimizer " << kind);
    for (size_t i = 0; i < cpu_params.size(); ++i) CHECK(same_values(cpu_params[i], gpu_params[i]));
  }
}

TEST_CASE("load_checkpoint(path, device) puts a DDP checkpoint's weights straight on a GPU", "[gpus:2]") {
  manual_seed(3);
  auto model = nn::Sequential(nn::Linear(4, 6), nn::ReLU(), nn::Linear(6, 2)).ptr();
  NamedTensors wrapped;
  for (const auto& [name, tensor] : model->state_dict()) wrapped.emplace_back("module." + name, tensor);
  const std::string path = temp_path("ddp_weights.safetensors");
  save_safetensors(path, wrapped);
  NamedTensors weights = nn::load_checkpoint(path, kCuda1);
  REQUIRE(weights.size() == model->state_dict().size());
  const NamedTensors original = model->state_dict();
  for (size_t i = 0; i < original.size(); ++i) {
    INFO(original[i].first);
    CHECK(weights[i].first == original[i].first);
    CHECK(weights[i].second.device() == kCuda1);
    CHECK(same_values(weights[i].second, original[i].second));
  }
  auto served = nn::Sequential(nn::Linear(4, 6), nn::ReLU(), nn::Linear(6, 2)).ptr();
  served->to(kCuda1);
  served->load_state_dict(weights);
  for (const Tensor& p : served->parameters()) CHECK(p.device() == kCuda1);
}
