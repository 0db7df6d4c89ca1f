// The collectives. Each validates on the caller's thread (misuse raises at the call site), stages
// non-contiguous tensors through contiguous copies on the caller's stream, and hands the NCCL
// calls to launch(), which queues them on the group's stream.
#include <cstring>

#include "comm/nccl/nccl_process_group.h"
#include "comm/nccl/nccl_types.h"
#include "comm/staging.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::comm::nccl {

WorkPtr NcclProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce");
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(tensor.dtype()), "all_reduce on ", comm_->group,
              ": avg needs a floating tensor, got ", dtype_name(tensor.dtype()));
  Staged s = stage(tensor, true);
  CollectiveInfo i = info(CollectiveKind::AllReduce, &tensor, op);
  return launch(
      i, {s.original, s.buffer},
      [&](cudaStream_t stream) {
        check(i, ncclAllReduce(s.data(), s.data(), s.buffer.numel(), nccl_type(tensor.dtype()),
                               nccl_op(op, tensor.dtype()), comm_->comm, stream));
      },
      [&] { s.finish(); });
}

WorkPtr NcclProcessGroup::broadcast(const Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast");
  check_rank(root, "root", "broadcast");
  Staged s = stage(tensor, true);
  CollectiveInfo i = info(CollectiveKind::Broadcast, &tensor, ReduceOp::Sum, root);
  return launch(
      i, {s.original, s.buffer},
      [&](cudaStream_t stream) {
        check(i, ncclBroadcast(s.data(), s.data(), s.buffer.numel(), nccl_type(tensor.dtype()), root, comm_->comm,
                               stream));
      },
      [&] { s.finish(); });
}

WorkPtr NcclProcessGroup::reduce(const Tensor& tensor, int root, ReduceOp op) {
  check_tensor(tensor, "reduce");
  check_rank(root, "root", "reduce");
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(tensor.dtype()), "reduce on ", comm_->group,
              ": avg needs a floating tensor, got ", dtype_name(tensor.dtype()));
  Staged s = stage(tensor, true);
  CollectiveInfo i = info(CollectiveKind::Reduce, &tensor, op, root);
  return launch(
      i, {s.original, s.buffer},
      [&](cudaStream_t stream) {
        check(i, ncclReduce(s.data(), s.data(), s.buffer.numel(), nccl_type(tensor.dtype()),
                            nccl_op(op, tensor.dtype()), root, comm_->comm, stream));
      },
      [&] {
        if (comm_->rank == root) s.finish();
      });
}

WorkPtr NcclProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  check_tensor(input, "all_gather");
  EMBER_CHECK(static_cast<int>(outputs.size()) == comm_->size, "all_gather on ", comm_->group, ": expected ",
              comm_->size, " output tensors, got ", outputs.size());
  for (const Tensor& o : outputs) {
    check_tensor(o, "all_gather");
    EMBER_CHECK(o.sizes() == input.sizes() && o.dtype() == input.dtype(), "all_gather on ", comm_->group,
                ": every output must match the input ", dtype_name(input.dtype()), " ", shape_str(input.sizes()),
                ", got ", dtype_name(o.dtype()), " ", shape_str(o.sizes()));
  }
  Staged in = stage(input, false);
  Shape flat_shape = input.sizes();
  flat_shape.insert(flat_shape.begin(), comm_->size);
  Tensor flat = empty(flat_shape, input.options());
  CollectiveInfo i = info(CollectiveKind::AllGather, &input);
  std::vector<Tensor> held = {in.buffer, flat};
  for (const Tensor& o : outputs) held.push_back(o);
  return launch(
      i, held,
      [&](cudaStream_t stream) {
        check(i, ncclAllGather(in.data(), flat.data_ptr(), in.buffer.numel(), nccl_type(input.dtype()), comm_->comm,
                               stream));
      },
      [&] {
        for (int r = 0; r < comm_->size; ++r) copy_into(outputs[r], flat.select(0, r));
      });
}

WorkPtr NcclProcessGroup::all_gather_into_tensor(const Tensor& output, const Tensor& input) {
  check_tensor(input, "all_gather_into_tensor");
  check_tensor(output, "all_gather_into_tensor");
  EMBER_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel() * comm_->size,
              "all_gather_into_tensor on ", comm_->group, ": the output must hold ", comm_->size, " inputs of ",
              dtype_name(input.dtype()), " ", shape_str(input.sizes()), ", got ", dtype_name(output.dtype()), " ",
              shape_str(output.sizes()));
  Staged in = stage(input, false);
  Staged out = stage(output, true);
  CollectiveInfo i = info(CollectiveKind::AllGatherIntoTensor, &input);
  return launch(
      i, {in.buffer, out.original, out.buffer},
      [&](cudaStream_t stream) {
        check(i,
              ncclAllGather(in.data(), out.data(), in.buffer.numel(), nccl_type(input.dtype()), comm_->comm, stream));
      },
      [&] { out.finish(); });
}

WorkPtr NcclProcessGroup::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  check_tensor(output, "reduce_scatter");
  EMBER_CHECK(static_cast<int>(inputs.size()) == comm_->size, "reduce_scatter on ", comm_->group, ": expected ",
              comm_->size, " input tensors, got ", inputs.size());
  for (const Tensor& t : inputs) {
    check_tensor(t, "reduce_scatter");
    EMBER_CHECK(t.sizes() == output.sizes() && t.dtype() == output.dtype(), "reduce_scatter on ", comm_->group,
                ": every input must match the output ", dtype_name(output.dtype()), " ", shape_str(output.sizes()),
                ", got ", dtype_name(t.dtype()), " ", shape_str(t.sizes()));
  }
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(output.dtype()), "reduce_scatter on ", comm_->group,
              ": avg needs a floating tensor");
  Tensor flat;
  {
    NoGradGuard no_grad;
    std::vector<Tensor> parts;
    for (const Tensor& t : inputs) parts.push_back(t.detach().unsqueeze(0));
    flat = cat(parts, 0).contiguous();
  }
  Staged out = stage(output, true);
  CollectiveInfo i = info(CollectiveKind::ReduceScatter, &output, op);
  return launch(
      i, {flat, out.original, out.buffer},
      [&](cudaStream_t stream) {
        check(i, ncclReduceScatter(flat.data_ptr(), out.data(), out.buffer.numel(), nccl_type(output.dtype()),
                                   nccl_op(op, output.dtype()), comm_->comm, stream));
      },
      [&] { out.finish(); });
}

WorkPtr NcclProcessGroup::reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_tensor(input, "reduce_scatter_tensor");
  check_tensor(output, "reduce_scatter_tensor");
  EMBER_CHECK(output.dtype() == input.dtype() && input.numel() == output.numel() * comm_->size,
              "reduce_scatter_tensor on ", comm_->group, ": the input must hold ", comm_->size, " outputs of ",
              dtype_name(output.dtype()), " ", shape_str(output.sizes()), ", got ", dtype_name(input.dtype()), " ",
              shape_str(input.sizes()));
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(input.dtype()), "reduce_scatter_tensor on ", comm_->group,
              ": avg needs a floating tensor");
  Staged in = stage(input, false);
  Staged out = stage(output, true);
  CollectiveInfo i = info(CollectiveKind::ReduceScatterTensor, &input, op);
  return launch(
      i, {in.buffer, out.original, out.buffer},
      [&](cudaStream_t stream) {
        check(i, ncclReduceScatter(in.data(), out.data(), out.buffer.numel(), nccl_type(input.dtype()),
                                   nccl_op(op, input.dtype()), comm_->comm, stream));
      },
      [&] { out.finish(); });
}

WorkPtr NcclProcessGroup::all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  const int n = comm_->size;
  EMBER_CHECK(static_cast<int>(inputs.size()) == n && static_cast<int>(outputs.size()) == n, "all_to_all on ",
              comm_->group, ": expected ", n, " inputs and ", n, " outputs, got ", inputs.size(), " and ",
              outputs.size());
  std::vector<Staged> in, out;
  for (int r = 0; r < n; ++r) {
    check_tensor(inputs[r], "all_to_all");
    check_tensor(outputs[r], "all_to_all");
    EMBER_CHECK(inputs[r].dtype() == inputs[0].dtype() && outputs[r].dtype() == inputs[0].dtype(), "all_to_all on ",
                comm_->group, ": every tensor must be ", dtype_name(inputs[0].dtype()));
    in.push_back(stage(inputs[r], false));
    out.push_back(stage(outputs[r], true));
  }
  CollectiveInfo i = info(CollectiveKind::AllToAll, &inputs[comm_->rank]);
  std::vector<Tensor> held;
  for (int r = 0; r < n; ++r) held.insert(held.end(), {in[r].buffer, out[r].original, out[r].buffer});
  const ncclDataType_t type = nccl_type(inputs[0].dtype());
  return launch(
      i, held,
      [&](cudaStream_t stream) {
        check(i, ncclGroupStart());
        for (int r = 0; r < n; ++r) {
          if (r == comm_->rank) continue;
          check(i, ncclSend(in[r].data(), in[r].buffer.numel(), type, r, comm_->comm, stream));
          check(i, ncclRecv(out[r].data(), out[r].buffer.numel(), type, r, comm_->comm, stream));
        }
        check(i, ncclGroupEnd());
      },
      [&] {
        copy_into(out[comm_->rank].buffer, in[comm_->rank].buffer);
        for (const Staged& s : out) s.finish();
      });
}

WorkPtr NcclProcessGroup::all_to_all_single(const Tensor& output, const Tensor& input) {
  const int n = comm_->size;
  check_tensor(input, "all_to_all_single");
  check_tensor(output, "all_to_all_single");
  EMBER_CHECK(
      input.dim() >= 1 && input.size(0) % n == 0 && output.sizes() == input.sizes() && output.dtype() == input.dtype(),
      "all_to_all_single on ", comm_->group,
      ": expected input and output of one shape and dtype whose dim 0 "
      "divides by ",
      n, ", got ", dtype_name(input.dtype()), " ", shape_str(input.sizes()), " and ", dtype_name(output.dtype()), " ",
      shape_str(output.sizes()));
  Staged in = stage(input, false);
  Staged out = stage(output, true);
  CollectiveInfo i = info(CollectiveKind::AllToAllSingle, &input);
  const int64_t chunk = input.numel() / n;
  const int64_t bytes = chunk * static_cast<int64_t>(element_size(input.dtype()));
  const ncclDataType_t type = nccl_type(input.dtype());
  return launch(
      i, {in.buffer, out.original, out.buffer},
      [&](cudaStream_t stream) {
        auto* send = static_cast<char*>(in.data());
        auto* recv = static_cast<char*>(out.data());
        check(i, ncclGroupStart());
        for (int r = 0; r < n; ++r) {
          if (r == comm_->rank) continue;
          check(i, ncclSend(send + r * bytes, chunk, type, r, comm_->comm, stream));
          check(i, ncclRecv(recv + r * bytes, chunk, type, r, comm_->comm, stream));
        }
        check(i, ncclGroupEnd());
      },
      [&] {
        const int64_t rows = input.size(0) / n;
        copy_into(out.buffer.narrow(0, comm_->rank * rows, rows), in.buffer.narrow(0, comm_->rank * rows, rows));
        out.finish();
      });
}

WorkPtr NcclProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  check_tensor(tensor, "send");
  check_rank(dst, "destination", "send");
  EMBER_CHECK(dst != comm_->rank, "send on ", comm_->group, ": rank ", comm_->rank, " cannot send to itself");
  EMBER_CHECK(tag >= 0, "send on ", comm_->group, ": the tag must be non-negative, got ", tag);
  Staged s = stage(tensor, false);
  CollectiveInfo i = p2p_info(CollectiveKind::Send, tensor, dst, tag);
  return launch(i, {s.buffer}, [&](cudaStream_t stream) {
    check(i, ncclGroupStart());
    check(i, ncclSend(s.data(), s.buffer.numel(), nccl_type(tensor.dtype()), dst, comm_->comm, stream));
    check(i, ncclGroupEnd());
  });
}

WorkPtr NcclProcessGroup::recv(const Tensor& tensor, int src, int tag) {
  check_tensor(tensor, "recv");
  check_rank(src, "source", "recv");
  EMBER_CHECK(src != comm_->rank, "recv on ", comm_->group, ": rank ", comm_->rank, " cannot receive from itself");
  EMBER_CHECK(tag >= 0, "recv on ", comm_->group, ": the tag must be non-negative, got ", tag);
  Staged s = stage(tensor, true);
  CollectiveInfo i = p2p_info(CollectiveKind::Recv, tensor, src, tag);
  return launch(
      i, {s.original, s.buffer},
      [&](cudaStream_t stream) {
        check(i, ncclGroupStart());
        check(i, ncclRecv(s.data(), s.buffer.numel(), nccl_type(tensor.dtype()), src, comm_->comm, stream));
        check(i, ncclGroupEnd());
      },
      [&] { s.finish(); });
}

WorkPtr NcclProcessGroup::barrier() {
  CollectiveInfo i = info(CollectiveKind::Barrier, nullptr);
  Tensor one;
  {
    cuda::DeviceGuard on(comm_->device);
    one = zeros({1}, TensorOptions(kFloat32).device(device()));
  }
  return launch(
      i, {one},
      [&](cudaStream_t stream) {
        check(i, ncclAllReduce(one.data_ptr(), one.data_ptr(), 1, ncclFloat32, ncclSum, comm_->comm, stream));
      },
      {}, /*host_blocking=*/true);
}

}  // namespace ember::comm::nccl
