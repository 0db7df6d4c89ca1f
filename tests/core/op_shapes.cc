// The harness's shape generators: random ranks and sizes (including 0 and 1), broadcastable
// operand shapes, dim subsets and the pairs matmul, cat, stack and split need.
#include <algorithm>

#include "tests/core/op_harness.h"

namespace ember::test {

// ---- shape drawing ----

namespace {

// Set by check_op_case for the trials it runs (HarnessOptions::large).
bool large_shapes = false;

int64_t draw_size(Rng& rng, bool allow_empty) {
  if (allow_empty && rng.chance(0.06)) return 0;
  static const std::vector<int64_t> small = {1, 1, 2, 3, 4, 5, 7};
  static const std::vector<int64_t> large = {1, 3, 33, 67, 130, 257, 300};
  return rng.pick(large_shapes ? large : small);
}

int64_t element_cap() { return large_shapes ? 80000 : 300; }

Shape draw_shape(Rng& rng, bool allow_empty, int64_t min_rank = 0, int64_t max_rank = 4) {
  static const std::vector<int64_t> ranks = {0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4};
  int64_t rank;
  do rank = rng.pick(ranks);
  while (rank < min_rank || rank > max_rank);
  Shape shape(static_cast<size_t>(rank));
  for (int64_t& s : shape) s = draw_size(rng, allow_empty);
  while (count_elements(shape) > element_cap()) *std::max_element(shape.begin(), shape.end()) /= 2;
  return shape;
}

int64_t draw_dim(Rng& rng, int64_t rank) {
  int64_t n = std::max<int64_t>(rank, 1);
  int64_t d = rng.integer(0, n - 1);
  return rng.chance(0.4) ? d - n : d;
}

// A shape that broadcasts to `full`: some leading dims dropped, some dims set to 1.
Shape broadcastable_to(Rng& rng, const Shape& full) {
  Shape s = full;
  if (!s.empty() && rng.chance(0.3)) s.erase(s.begin(), s.begin() + rng.integer(1, static_cast<int64_t>(s.size())));
  if (rng.chance(0.4))
    for (int64_t& d : s)
      if (rng.chance(0.4)) d = 1;
  return s;
}

}  // namespace

namespace detail {
void set_large_shapes(bool large) { large_shapes = large; }
}  // namespace detail

ShapeGenerator inplace_shapes(int inputs) {
  return [inputs](Rng& rng, OpArgs&, bool allow_empty) {
    Shape full = draw_shape(rng, allow_empty);
    std::vector<Shape> shapes{full};
    for (int i = 1; i < inputs; ++i) shapes.push_back(broadcastable_to(rng, full));
    return shapes;
  };
}

ShapeGenerator elementwise_shapes(int inputs) {
  return [inputs](Rng& rng, OpArgs& args, bool allow_empty) {
    std::vector<Shape> shapes = inplace_shapes(inputs)(rng, args, allow_empty);
    // Any operand may be the smaller one.
    std::shuffle(shapes.begin(), shapes.end(), std::mt19937_64(static_cast<uint64_t>(rng.integer(0, 1 << 30))));
    return shapes;
  };
}

ShapeGenerator same_shape(int inputs) {
  return [inputs](Rng& rng, OpArgs&, bool allow_empty) {
    return std::vector<Shape>(static_cast<size_t>(inputs), draw_shape(rng, allow_empty));
  };
}

ShapeGenerator reduction_shapes() {
  return [](Rng& rng, OpArgs& args, bool allow_empty) {
    Shape shape = draw_shape(rng, allow_empty);
    const int64_t rank = static_cast<int64_t>(shape.size());
    args.dims.clear();
    if (rank == 0) {
      if (rng.chance(0.5)) args.dims.push_back(rng.chance(0.5) ? 0 : -1);
    } else if (!rng.chance(0.25)) {
      for (int64_t d = 0; d < rank; ++d)
        if (rng.chance(0.5)) args.dims.push_back(rng.chance(0.3) ? d - rank : d);
      if (args.dims.empty()) args.dims.push_back(draw_dim(rng, rank));
      std::shuffle(args.dims.begin(), args.dims.end(), std::mt19937_64(static_cast<uint64_t>(rng.integer(0, 1 << 30))));
    }
    args.keepdim = rng.chance(0.5);
    return std::vector<Shape>{shape};
  };
}

ShapeGenerator one_dim_shapes(int inputs) {
  return [inputs](Rng& rng, OpArgs& args, bool allow_empty) {
    Shape shape = draw_shape(rng, allow_empty);
    args.dims = {draw_dim(rng, static_cast<int64_t>(shape.size()))};
    args.keepdim = rng.chance(0.5);
    return std::vector<Shape>(static_cast<size_t>(inputs), shape);
  };
}

ShapeGenerator cat_shapes(int inputs) {
  return [inputs](Rng& rng, OpArgs& args, bool allow_empty) {
    Shape shape = draw_shape(rng, allow_empty, 1);
    const int64_t rank = static_cast<int64_t>(shape.size());
    args.dims = {draw_dim(rng, rank)};
    int64_t d = wrap(args.dims[0], rank);
    std::vector<int64_t> lengths;  // along the cat dim; an input with nothing there is legal
    for (int i = 0; i < inputs; ++i) lengths.push_back(draw_size(rng, true));
    shape[d] = std::max<int64_t>(1, *std::max_element(lengths.begin(), lengths.end()));
    while (count_elements(shape) > element_cap()) {
      int64_t other = -1;
      for (int64_t k = 0; k < rank; ++k)
        if (k != d && (other < 0 || shape[k] > shape[other])) other = k;
      if (other < 0 || shape[other] <= 1) break;
      shape[other] /= 2;
    }
    std::vector<Shape> shapes;
    for (int64_t length : lengths) {
      Shape s = shape;
      s[d] = length;
      shapes.push_back(s);
    }
    return shapes;
  };
}

ShapeGenerator stack_shapes(int inputs) {
  return [inputs](Rng& rng, OpArgs& args, bool allow_empty) {
    Shape shape = draw_shape(rng, allow_empty, 0, 3);
    const int64_t positions = static_cast<int64_t>(shape.size()) + 1;
    int64_t d = rng.integer(0, positions - 1);
    args.dims = {rng.chance(0.4) ? d - positions : d};
    return std::vector<Shape>(static_cast<size_t>(inputs), shape);
  };
}

ShapeGenerator split_shapes() {
  return [](Rng& rng, OpArgs& args, bool allow_empty) {
    Shape shape = draw_shape(rng, allow_empty, 1);
    args.dims = {draw_dim(rng, static_cast<int64_t>(shape.size()))};
    args.count = rng.integer(1, 4);
    return std::vector<Shape>{shape};
  };
}

ShapeGenerator matmul_shapes() {
  return [](Rng& rng, OpArgs&, bool allow_empty) {
    auto size = [&] { return draw_size(rng, allow_empty); };
    int64_t m = size(), k = size(), n = size();
    Shape batch = draw_shape(rng, allow_empty, 1, 2);
    // The reference costs batch * m * k * n multiply-adds.
    while (count_elements(batch) * m * k * n > 100 * element_cap()) {
      int64_t* largest = &m;
      for (int64_t* s : {&k, &n, &batch[0]})
        if (*s > *largest) largest = s;
      *largest /= 2;
    }
    switch (rng.integer(0, 8)) {
      case 0:
        return std::vector<Shape>{{k}, {k}};
      case 1:
        return std::vector<Shape>{{m, k}, {k}};
      case 2:
        return std::vector<Shape>{{k}, {k, n}};
      case 3:
        return std::vector<Shape>{{m, k}, {k, n}};
      case 4: {
        Shape a = broadcastable_to(rng, batch), b = broadcastable_to(rng, batch);
        a.insert(a.end(), {m, k});
        b.insert(b.end(), {k, n});
        return std::vector<Shape>{a, b};
      }
      case 5:
        batch.insert(batch.end(), {m, k});
        return std::vector<Shape>{batch, {k, n}};
      case 6:
        batch.insert(batch.end(), {k, n});
        return std::vector<Shape>{{m, k}, batch};
      case 7:
        batch.insert(batch.end(), {m, k});
        return std::vector<Shape>{batch, {k}};
      default:
        batch.insert(batch.end(), {k, n});
        return std::vector<Shape>{{k}, batch};
    }
  };
}

}  // namespace ember::test
