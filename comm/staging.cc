#include "comm/staging.h"

#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::comm {

void Staged::finish() const {
  if (!write_back) return;
  NoGradGuard no_grad;
  copy_into(original, buffer);
}

Staged stage(const Tensor& t, bool write_back) {
  NoGradGuard no_grad;
  Staged s;
  s.original = t.detach();
  if (t.is_contiguous()) {
    s.buffer = s.original;
  } else {
    s.buffer = s.original.contiguous();
    s.write_back = write_back;
  }
  return s;
}

void divide_by(const Tensor& t, int size) {
  NoGradGuard no_grad;
  Tensor view = t.detach();
  view.div_(scalar_tensor(static_cast<double>(size), t.dtype()));
}

}  // namespace ember::comm
