// Factories: empty/zeros/ones/full, arange (int and float, negative steps), linspace, eye,
// tensor() from vectors and initializer lists, from_buffer, from_blob, item and to_vector.
#include <catch2/catch.hpp>

#include "core/ember_core.h"

using namespace ember;

TEST_CASE("empty, zeros, ones and full take shape, dtype and requires_grad") {
  Tensor e = empty({2, 3}, kFloat64);
  CHECK(e.sizes() == Shape{2, 3});
  CHECK(e.strides() == Shape{3, 1});
  CHECK(e.dtype() == kFloat64);
  CHECK(e.device() == Device(kCPU));
  CHECK(zeros({4}, kInt32).to_vector<int32_t>() == std::vector<int32_t>(4, 0));
  CHECK(ones({2, 2}, kBool).to_vector<bool>() == std::vector<bool>(4, true));
  CHECK(full({3}, 2.5, kBFloat16).to_vector<float>() == std::vector<float>(3, 2.5f));
  CHECK(full({2}, -1, kUInt8).to_vector<uint8_t>() == std::vector<uint8_t>(2, 255));
  CHECK(full({}, 4).dim() == 0);
  CHECK(zeros({0, 5}).numel() == 0);
  CHECK(zeros({2}, TensorOptions(kFloat32).requires_grad(true)).requires_grad());
  Tensor like = full_like(e, 7);
  CHECK(like.dtype() == kFloat64);
  CHECK(like.to_vector<double>() == std::vector<double>(6, 7.0));
  CHECK(ones_like(zeros({3}, kInt64)).to_vector<int64_t>() == std::vector<int64_t>(3, 1));
  CHECK_THROWS_WITH(empty({2, -1}), Catch::Contains("empty: negative dimension -1 in shape [2, -1]"));
}

TEST_CASE("arange picks int64 for integer arguments and float32 otherwise") {
  Tensor a = arange(5);
  CHECK(a.dtype() == kInt64);
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(2, 11, 3).to_vector<int64_t>() == std::vector<int64_t>{2, 5, 8});
  CHECK(arange(5, -4, -3).to_vector<int64_t>() == std::vector<int64_t>{5, 2, -1});
  CHECK(arange(3, 3).numel() == 0);
  Tensor f = arange(0.5, 2.0, 0.5);
  CHECK(f.dtype() == kFloat32);
  CHECK(f.to_vector<float>() == std::vector<float>{0.5f, 1.0f, 1.5f});
  CHECK(arange(1.0, 0.0, -0.25).to_vector<float>() == std::vector<float>{1.0f, 0.75f, 0.5f, 0.25f});
  CHECK(arange(4, TensorOptions(kFloat64)).to_vector<double>() == std::vector<double>{0, 1, 2, 3});
  CHECK(arange(0, 3, 1, TensorOptions(kBFloat16)).dtype() == kBFloat16);
  // Exact beyond 2^53, where a double would round.
  int64_t big = (int64_t{1} << 60) + 1;
  CHECK(arange(big, big + 2).to_vector<int64_t>() == std::vector<int64_t>{big, big + 1});
  CHECK_THROWS_WITH(arange(0, 5, 0), Catch::Contains("arange: step must be nonzero"));
  CHECK_THROWS_WITH(arange(0, 5, -1), Catch::Contains("arange") && Catch::Contains("step sign"));
}

TEST_CASE("linspace includes both ends and eye puts ones on the diagonal") {
  CHECK(linspace(0, 1, 5).to_vector<float>() == std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f, 1.0f});
  CHECK(linspace(2, -2, 3, kFloat64).to_vector<double>() == std::vector<double>{2, 0, -2});
  CHECK(linspace(0.1, 0.7, 7, kFloat64).to_vector<double>().back() == 0.7);
  CHECK(linspace(3, 10, 1).to_vector<float>() == std::vector<float>{3});  // one step is the start
  CHECK(linspace(0, 1, 0).numel() == 0);
  CHECK_THROWS_WITH(linspace(0, 1, -1), Catch::Contains("linspace") && Catch::Contains("-1"));

  CHECK(eye(3).to_vector<float>() == std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  Tensor r = eye(2, 3, kInt64);
  CHECK(r.sizes() == Shape{2, 3});
  CHECK(r.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 0, 1, 0});
  CHECK(eye(3, 1).to_vector<float>() == std::vector<float>{1, 0, 0});
  CHECK(eye(0).sizes() == Shape{0, 0});
}

TEST_CASE("tensor() copies vectors and initializer lists with the element type's dtype") {
  Tensor f = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2});
  CHECK(f.dtype() == kFloat32);
  CHECK(f.sizes() == Shape{2, 2});
  CHECK(f[1][0].item<float>() == 3.0f);
  CHECK(tensor({1.0, 2.0}).dtype() == kFloat64);
  CHECK(tensor<int64_t>({5, 6}).dtype() == kInt64);
  CHECK(tensor<int32_t>({5}).dtype() == kInt32);
  CHECK(tensor<uint8_t>({200}).item<int64_t>() == 200);
  Tensor b = tensor(std::vector<bool>{true, false, true});
  CHECK(b.dtype() == kBool);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(tensor(std::vector<BFloat16>{BFloat16(1.5f)}).dtype() == kBFloat16);
  CHECK(tensor(std::vector<Half>{Half(0.5f)}).item<float>() == 0.5f);
  std::vector<float> source{1, 2, 3};
  Tensor copy = tensor(source);
  source[0] = 100;
  CHECK(copy[0].item<float>() == 1.0f);  // a copy, not a wrapper
  CHECK(tensor(std::vector<float>{}).sizes() == Shape{0});
  CHECK_THROWS_WITH(tensor({1.f, 2.f, 3.f}, {2, 2}), Catch::Contains("tensor: 3 values cannot fill shape [2, 2]"));
}

TEST_CASE("from_buffer copies, from_blob wraps and runs its deleter exactly once") {
  int32_t data[6] = {1, 2, 3, 4, 5, 6};
  Tensor copied = from_buffer(data, {2, 3}, kInt32);
  data[0] = 42;
  CHECK(copied[0][0].item<int32_t>() == 1);

  int deleted = 0;
  void* seen = nullptr;
  {
    Tensor wrapped = from_blob(data, {3, 2}, kInt32, [&](void* p) {
      ++deleted;
      seen = p;
    });
    CHECK(wrapped.data_ptr() == data);
    CHECK(wrapped[0][0].item<int32_t>() == 42);
    Tensor view = wrapped.t()[1];  // views keep the blob alive
    wrapped = Tensor();
    CHECK(deleted == 0);
    view.fill_(-7);  // writes land in the caller's memory
    CHECK(data[1] == -7);
    CHECK(data[3] == -7);
    Tensor another = view;
    view = Tensor();
    CHECK(deleted == 0);
  }
  CHECK(deleted == 1);
  CHECK(seen == data);
  Tensor no_deleter = from_blob(data, {6}, kInt32);
  CHECK(no_deleter.to_vector<int32_t>()[4] == 5);
}

TEST_CASE("item and to_vector convert to any element type") {
  Tensor x = tensor({2.75f});
  CHECK(x.item<float>() == 2.75f);
  CHECK(x.item() == 2.75);
  CHECK(x.item<int64_t>() == 2);
  CHECK(x.item<bool>());
  CHECK(full({1, 1, 1}, 3, kInt32).item<double>() == 3.0);
  CHECK(full({}, true, kBool).item<int32_t>() == 1);
  Tensor m = tensor({1.5f, -2.5f, 3.0f, 0.0f}, {2, 2});
  CHECK(m.t().to_vector<float>() == std::vector<float>{1.5f, 3.0f, -2.5f, 0.0f});  // logical order
  CHECK(m.to_vector<int32_t>() == std::vector<int32_t>{1, -2, 3, 0});
  CHECK(m.to_vector<bool>() == std::vector<bool>{true, true, true, false});
  CHECK(m.to_vector<double>() == std::vector<double>{1.5, -2.5, 3.0, 0.0});
  CHECK(zeros({0, 3}).to_vector<float>().empty());
  CHECK(zeros({0, 4}).select(1, 2).to_vector<float>().empty());
  CHECK_THROWS_WITH(m.item<float>(),
                    Catch::Contains("item") && Catch::Contains("one element") && Catch::Contains("[2, 2]"));
  CHECK_THROWS_WITH(zeros({0}).item(), Catch::Contains("item") && Catch::Contains("[0]"));
}
