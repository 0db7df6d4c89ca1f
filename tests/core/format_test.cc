// Printing: the expected strings are what PyTorch 1.13 prints for the same tensors (repr()),
// except that Ember spells the dtype suffix "dtype=float64" instead of "dtype=torch.float64".
#include <cmath>
#include <sstream>

#include <catch2/catch.hpp>

#include "core/ember_core.h"

using namespace ember;

namespace {

Tensor floats(std::vector<float> v) { return tensor(v); }
Tensor fiota(int64_t n) { return arange(0, n, 1, TensorOptions(kFloat32)); }

}  // namespace

TEST_CASE("matrices print one row per line, aligned under the first") {
  CHECK(tensor({1.f, 2.f, 3.f, 4.f}, {2, 2}).str() == "tensor([[1., 2.],\n        [3., 4.]])");
  CHECK(arange(12).view({3, 4}).str() ==
        "tensor([[ 0,  1,  2,  3],\n"
        "        [ 4,  5,  6,  7],\n"
        "        [ 8,  9, 10, 11]])");
  CHECK(fiota(8).view({2, 2, 2}).str() ==
        "tensor([[[0., 1.],\n"
        "         [2., 3.]],\n"
        "\n"
        "        [[4., 5.],\n"
        "         [6., 7.]]])");
  std::ostringstream out;
  out << tensor({1.f, -2.f});
  CHECK(out.str() == "tensor([ 1., -2.])");
}

TEST_CASE("floats print in integer, fixed or scientific style chosen from the values") {
  CHECK(floats({0.5f, -1.25f, 3.f}).str() == "tensor([ 0.5000, -1.2500,  3.0000])");
  CHECK(floats({0.1f, 0.25f}).str() == "tensor([0.1000, 0.2500])");
  CHECK(floats({1e-5f, 1.f}).str() == "tensor([1.0000e-05, 1.0000e+00])");
  CHECK(floats({1e9f, 2.f}).str() == "tensor([1.0000e+09, 2.0000e+00])");
  CHECK(floats({123456.5f, 1.f}).str() == "tensor([1.2346e+05, 1.0000e+00])");
  // Whole numbers spanning more than three decades switch to scientific too.
  CHECK(floats({1.f, 2000.f}).str() == "tensor([1.0000e+00, 2.0000e+03])");
  CHECK(floats({0.f, 0.f}).str() == "tensor([0., 0.])");
  CHECK(floats({0.f, -1.f}).str() == "tensor([ 0., -1.])");
}

TEST_CASE("nan and inf do not widen the columns of finite values") {
  CHECK(floats({NAN, 1.f, INFINITY}).str() == "tensor([nan, 1., inf])");
  CHECK(floats({NAN, 1.5f, -INFINITY}).str() == "tensor([   nan, 1.5000,   -inf])");
}

TEST_CASE("0-dim, empty, bool and integer tensors") {
  CHECK(full({}, 3.0).str() == "tensor(3.)");
  CHECK(full({}, -5, kInt64).str() == "tensor(-5)");
  CHECK(tensor(std::vector<bool>{true, false}).str() == "tensor([ True, False])");
  CHECK(zeros({0}).str() == "tensor([])");
  CHECK(zeros({0, 3}).str() == "tensor([], size=(0, 3))");
  CHECK(zeros({0}, kFloat64).str() == "tensor([], dtype=float64)");
}

TEST_CASE("dtypes other than float32, int64 and bool are named") {
  CHECK(tensor({1.f, 2.f}).to(kFloat16).str() == "tensor([1., 2.], dtype=float16)");
  CHECK(tensor({1.f, 2.f}).to(kBFloat16).str() == "tensor([1., 2.], dtype=bfloat16)");
  CHECK(tensor<int32_t>({1, 2}).str() == "tensor([1, 2], dtype=int32)");
  CHECK(tensor<uint8_t>({7}).str() == "tensor([7], dtype=uint8)");
  CHECK(full({}, 0.5, kFloat64).str() == "tensor(0.5000, dtype=float64)");
  CHECK(zeros({1}, TensorOptions(kFloat32).requires_grad(true)).str() == "tensor([0.], requires_grad=True)");
  CHECK(Tensor().str() == "[ undefined Tensor ]");
}

TEST_CASE("long rows wrap at 80 columns") {
  CHECK(fiota(20).str() ==
        "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
        "        14., 15., 16., 17., 18., 19.])");
  CHECK(arange(30).str() ==
        "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
        "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])");
}

TEST_CASE("more than 1000 elements are summarised with the three edge items of each dim") {
  CHECK(arange(2000).str() == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  CHECK(arange(1200).view({2, 2, 300}).str() ==
        "tensor([[[   0,    1,    2,  ...,  297,  298,  299],\n"
        "         [ 300,  301,  302,  ...,  597,  598,  599]],\n"
        "\n"
        "        [[ 600,  601,  602,  ...,  897,  898,  899],\n"
        "         [ 900,  901,  902,  ..., 1197, 1198, 1199]]])");
  CHECK(fiota(2000).view({40, 50}).str() ==
        "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,\n"
        "         4.9000e+01],\n"
        "        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,\n"
        "         9.9000e+01],\n"
        "        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,\n"
        "         1.4900e+02],\n"
        "        ...,\n"
        "        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,\n"
        "         1.8990e+03],\n"
        "        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,\n"
        "         1.9490e+03],\n"
        "        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,\n"
        "         1.9990e+03]])");
  // Exactly 1000 elements is still printed in full.
  std::string full_print = arange(1000).str();
  CHECK(full_print.find("...") == std::string::npos);
  CHECK(full_print.find(" 999])") != std::string::npos);
}

TEST_CASE("non-contiguous tensors print their logical order") {
  CHECK(arange(6).view({2, 3}).t().str() == "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])");
  CHECK(arange(10).slice(0, 1, 10, 4).str() == "tensor([1, 5, 9])");
  CHECK(arange(3).expand({2, 3}).str() == "tensor([[0, 1, 2],\n        [0, 1, 2]])");
}
