// The collectives. Each validates on the caller's thread (so misuse raises at the call site), then
// queues a closure of Gloo calls on the group's worker.
#include "comm/gloo/gloo_process_group.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/reduce.h>

#include <cstring>

#include "comm/gloo/context.h"
#include "comm/gloo/reduce_functions.h"
#include "comm/host_backend.h"
#include "comm/rendezvous.h"
#include "comm/signature.h"
#include "comm/staging.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::comm::gloo_backend {

namespace {

// Slots (Gloo's matching keys) of Ember's own transfers, above the prefixes Gloo's collectives use:
// the prefix, then 24 bits (a tag or a ring step), then 32 bits of sequence number.
constexpr uint64_t kP2pSlot = 0xE0, kSignatureSlot = 0xE1, kRingSlot = 0xE2;
constexpr int kMaxTag = (1 << 24) - 1;

uint64_t slot(uint64_t prefix, uint64_t middle, uint64_t sequence) {
  return (prefix << 56) | ((middle & 0xFFFFFF) << 32) | (sequence & 0xFFFFFFFF);
}

// Gloo's options know an element only by its size (Ember's reductions know the dtype).
template <typename F>
void with_element(size_t element_size, F&& f) {
  switch (element_size) {
    case 1:
      f(uint8_t{});
      break;
    case 2:
      f(uint16_t{});
      break;
    case 4:
      f(uint32_t{});
      break;
    default:
      f(uint64_t{});
  }
}

template <typename T>
T* typed(const Staged& s) {
  return static_cast<T*>(s.data());
}

}  // namespace

GlooProcessGroup::GlooProcessGroup(Setup setup) : setup_(std::move(setup)), rank_(setup_.rank), size_(setup_.size) {
  Connected c = connect(setup_.store, setup_.prefix, rank_, size_, setup_.master_host, gloo_timeout());
  context_ = c.context;
  peers_ = std::move(c.peers);
}

GlooProcessGroup::~GlooProcessGroup() = default;

std::chrono::milliseconds GlooProcessGroup::gloo_timeout() const {
  // Past the watchdog's limit: it names a late collective first, for the whole job.
  return collective_timeout() + std::chrono::seconds(30);
}

void GlooProcessGroup::check_rank(int r, const char* what, const char* op) const {
  EMBER_CHECK(r >= 0 && r < size_, op, " on ", setup_.name, ": ", what, " rank ", r, " is outside the group of size ",
              size_);
}

CollectiveInfo GlooProcessGroup::info(CollectiveKind kind, const Tensor* tensor, ReduceOp op, int peer) {
  return CollectiveInfo::of(kind, ++sequence_, setup_.name, tensor, op, peer);
}

void GlooProcessGroup::fail(const CollectiveInfo& info, const std::exception& e) const {
  std::string what = e.what();
  // Gloo prefixes its source location ("[./gloo/transport/tcp/pair.cc:598] "): not the user's news.
  if (what.rfind("[", 0) == 0 && what.find("] ") != std::string::npos) what = what.substr(what.find("] ") + 2);
  const std::string broke = what_broke(what, peers_);
  if (!broke.empty())
    EMBER_FAIL("rank ", rank_, " of ", setup_.name, ": ", info.describe(), " failed: ", broke, " (Gloo: ", what,
               "); a rank probably died or exited early (see its output)");
  EMBER_FAIL("rank ", rank_, " of ", setup_.name, ": ", info.describe(), " failed in Gloo: ", what,
             " (a peer rank may have died)");
}

namespace {

void check_cpu(const Tensor& t, const char* op, const std::string& group) {
  EMBER_CHECK(t.defined(), op, " on ", group, ": got an undefined tensor");
  EMBER_CHECK(t.device().is_cpu(), op, " on ", group, ": the Gloo backend takes CPU tensors, got one on ",
              t.device().str(), " (EMBER_BACKEND=cpu:gloo,cuda:nccl carries CUDA tensors over NCCL)");
}

Staged stage_cpu(const Tensor& t, bool write_back, const char* op, const std::string& group) {
  check_cpu(t, op, group);
  return comm::stage(t, write_back);
}

}  // namespace

WorkPtr GlooProcessGroup::submit(CollectiveInfo i, std::function<void()> run) {
  auto work = std::make_shared<GlooWork>(i, rank_, worker_);
  const bool check = distributed_debug();
  worker_->submit(
      work,
      [this, i, run = std::move(run), check] {
        try {
          if (check) {
            Signature mine = signature_of(i);
            std::vector<Signature> all(size_);
            gather_bytes(&mine, all.data(), sizeof(Signature), 1, i.sequence);
            check_same_collective(i, all, rank_);
          }
          run();
        } catch (const ::gloo::Exception& e) {
          fail(i, e);
        }
      },
      OverlapScope::active());
  return work;
}

void GlooProcessGroup::gather_bytes(void* in, void* out, int64_t count, size_t element, uint64_t sequence) {
  if (count == 0) return;
  ::gloo::AllgatherOptions opts(context_);
  with_element(element, [&](auto e) {
    using T = decltype(e);
    opts.setInput(static_cast<T*>(in), static_cast<size_t>(count));
    opts.setOutput(static_cast<T*>(out), static_cast<size_t>(count) * size_);
  });
  opts.setTag(static_cast<uint32_t>(sequence));
  opts.setTimeout(gloo_timeout());
  ::gloo::allgather(opts);
}

void GlooProcessGroup::exchange_bytes(void* in, void* out, int64_t count, size_t element, uint64_t sequence) {
  if (count == 0) return;
  ::gloo::AlltoallOptions opts(context_);
  with_element(element, [&](auto e) {
    using T = decltype(e);
    opts.setInput(static_cast<T*>(in), static_cast<size_t>(count));
    opts.setOutput(static_cast<T*>(out), static_cast<size_t>(count));
  });
  opts.setTag(static_cast<uint32_t>(sequence));
  opts.setTimeout(gloo_timeout());
  ::gloo::alltoall(opts);
}

WorkPtr GlooProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(tensor.dtype()), "all_reduce on ", setup_.name,
              ": avg needs a floating tensor, got ", dtype_name(tensor.dtype()));
  Staged s = stage_cpu(tensor, true, "all_reduce", setup_.name);
  CollectiveInfo i = info(CollectiveKind::AllReduce, &tensor, op);
  return submit(i, [this, s, op, i] {
    const size_t n = static_cast<size_t>(s.buffer.numel());
    if (n > 0 && size_ > 1) {
      ::gloo::AllreduceOptions opts(context_);
      with_element(s.buffer.element_size(), [&](auto e) { opts.setOutput(typed<decltype(e)>(s), n); });
      opts.setReduceFunction(reduce_function(op, s.buffer.dtype()));
      opts.setTag(static_cast<uint32_t>(i.sequence));
      opts.setTimeout(gloo_timeout());
      ::gloo::allreduce(opts);
    }
    if (op == ReduceOp::Avg) divide_by(s.buffer, size_);
    s.finish();
  });
}

WorkPtr GlooProcessGroup::broadcast(const Tensor& tensor, int root) {
  check_rank(root, "root", "broadcast");
  Staged s = stage_cpu(tensor, true, "broadcast", setup_.name);
  CollectiveInfo i = info(CollectiveKind::Broadcast, &tensor, ReduceOp::Sum, root);
  return submit(i, [this, s, root, i] {
    const size_t n = static_cast<size_t>(s.buffer.numel());
    if (n > 0 && size_ > 1) {
      ::gloo::BroadcastOptions opts(context_);
      with_element(s.buffer.element_size(), [&](auto e) { opts.setOutput(typed<decltype(e)>(s), n); });
      opts.setRoot(root);
      opts.setTag(static_cast<uint32_t>(i.sequence));
      opts.setTimeout(gloo_timeout());
      ::gloo::broadcast(opts);
    }
    s.finish();
  });
}

WorkPtr GlooProcessGroup::reduce(const Tensor& tensor, int root, ReduceOp op) {
  check_rank(root, "root", "reduce");
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(tensor.dtype()), "reduce on ", setup_.name,
              ": avg needs a floating tensor, got ", dtype_name(tensor.dtype()));
  Staged s = stage_cpu(tensor, true, "reduce", setup_.name);
  CollectiveInfo i = info(CollectiveKind::Reduce, &tensor, op, root);
  return submit(i, [this, s, root, op, i] {
    const size_t n = static_cast<size_t>(s.buffer.numel());
    if (n > 0 && size_ > 1) {
      // Gloo's ring leaves partial sums in the other ranks' buffers: they reduce into a copy, so
      // only the root's tensor changes.
      Tensor scratch = rank_ == root ? s.buffer : s.buffer.clone();
      ::gloo::ReduceOptions opts(context_);
      with_element(s.buffer.element_size(),
                   [&](auto e) { opts.setOutput(static_cast<decltype(e)*>(scratch.data_ptr()), n); });
      opts.setReduceFunction(reduce_function(op, s.buffer.dtype()));
      opts.setRoot(root);
      opts.setTag(static_cast<uint32_t>(i.sequence));
      opts.setTimeout(gloo_timeout());
      ::gloo::reduce(opts);
    }
    if (rank_ != root) return;
    if (op == ReduceOp::Avg) divide_by(s.buffer, size_);
    s.finish();
  });
}

WorkPtr GlooProcessGroup::all_gather_into_tensor(const Tensor& output, const Tensor& input) {
  EMBER_CHECK(output.dtype() == input.dtype(), "all_gather_into_tensor on ", setup_.name, ": output dtype ",
              dtype_name(output.dtype()), " differs from input dtype ", dtype_name(input.dtype()));
  EMBER_CHECK(output.numel() == input.numel() * size_, "all_gather_into_tensor on ", setup_.name,
              ": expected an output of ", input.numel() * size_, " elements (", size_, " x input ",
              shape_str(input.sizes()), "), got ", shape_str(output.sizes()));
  Staged in = stage_cpu(input, false, "all_gather_into_tensor", setup_.name);
  Staged out = stage_cpu(output, true, "all_gather_into_tensor", setup_.name);
  CollectiveInfo i = info(CollectiveKind::AllGatherIntoTensor, &input);
  return submit(i, [this, in, out, i] {
    gather_bytes(in.data(), out.data(), in.buffer.numel(), in.buffer.element_size(), i.sequence);
    out.finish();
  });
}

WorkPtr GlooProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  EMBER_CHECK(static_cast<int>(outputs.size()) == size_, "all_gather on ", setup_.name, ": expected ", size_,
              " output tensors, got ", outputs.size());
  for (const Tensor& o : outputs)
    EMBER_CHECK(o.sizes() == input.sizes() && o.dtype() == input.dtype(), "all_gather on ", setup_.name,
                ": every output must match the input ", dtype_name(input.dtype()), " ", shape_str(input.sizes()),
                ", got ", dtype_name(o.dtype()), " ", shape_str(o.sizes()));
  Shape flat_shape = input.sizes();
  flat_shape.insert(flat_shape.begin(), size_);
  Tensor flat = empty(flat_shape, input.options());
  Staged in = stage_cpu(input, false, "all_gather", setup_.name);
  Staged gathered = comm::stage(flat, false);
  CollectiveInfo i = info(CollectiveKind::AllGather, &input);
  return submit(i, [this, in, gathered, outputs, i] {
    gather_bytes(in.data(), gathered.data(), in.buffer.numel(), in.buffer.element_size(), i.sequence);
    NoGradGuard no_grad;
    for (int r = 0; r < size_; ++r) copy_into(outputs[r], gathered.buffer.select(0, r));
  });
}

// Ring reduce-scatter over `data` (size_ chunks of chunk_bytes, overwritten): at step s each rank
// sends the chunk it reduced at step s-1 to the next rank and folds the previous rank's into its
// own copy, so after size_-1 steps chunk `rank_` holds every rank's contribution.
void GlooProcessGroup::ring_reduce_scatter(const CollectiveInfo& i, uint8_t* data, uint8_t* out, size_t chunk_bytes,
                                           DType dtype, ReduceOp op) {
  if (chunk_bytes == 0) return;
  const int n = size_;
  if (n > 1) {
    std::vector<uint8_t> incoming(chunk_bytes);
    auto outgoing = context_->createUnboundBuffer(data, chunk_bytes * n);
    auto inbox = context_->createUnboundBuffer(incoming.data(), chunk_bytes);
    const ReduceFunction combine = reduce_function(op, dtype);
    const size_t elements = chunk_bytes / element_size(dtype);
    const int next = (rank_ + 1) % n, previous = (rank_ + n - 1) % n;
    for (int step = 0; step < n - 1; ++step) {
      const int send_index = (rank_ - step - 1 + 2 * n) % n, recv_index = (rank_ - step - 2 + 2 * n) % n;
      const uint64_t key = slot(kRingSlot, static_cast<uint64_t>(step), i.sequence);
      inbox->recv(previous, key);
      outgoing->send(next, key, send_index * chunk_bytes, chunk_bytes);
      inbox->waitRecv(gloo_timeout());
      outgoing->waitSend(gloo_timeout());
      uint8_t* mine = data + recv_index * chunk_bytes;
      combine(mine, mine, incoming.data(), elements);
    }
  }
  std::memcpy(out, data + rank_ * chunk_bytes, chunk_bytes);
}

WorkPtr GlooProcessGroup::reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op) {
  EMBER_CHECK(output.dtype() == input.dtype(), "reduce_scatter_tensor on ", setup_.name, ": output dtype ",
              dtype_name(output.dtype()), " differs from input dtype ", dtype_name(input.dtype()));
  EMBER_CHECK(input.numel() == output.numel() * size_, "reduce_scatter_tensor on ", setup_.name,
              ": expected an input of ", output.numel() * size_, " elements (", size_, " x output ",
              shape_str(output.sizes()), "), got ", shape_str(input.sizes()));
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(input.dtype()), "reduce_scatter_tensor on ", setup_.name,
              ": avg needs a floating tensor");
  Staged in = stage_cpu(input, false, "reduce_scatter_tensor", setup_.name);
  Staged out = stage_cpu(output, true, "reduce_scatter_tensor", setup_.name);
  CollectiveInfo i = info(CollectiveKind::ReduceScatterTensor, &output, op);
  return submit(i, [this, in, out, op, i] {
    std::vector<uint8_t> scratch(static_cast<const uint8_t*>(in.data()),
                                 static_cast<const uint8_t*>(in.data()) + in.buffer.nbytes());
    ring_reduce_scatter(i, scratch.data(), static_cast<uint8_t*>(out.data()), out.buffer.nbytes(), in.buffer.dtype(),
                        op);
    if (op == ReduceOp::Avg) divide_by(out.buffer, size_);
    out.finish();
  });
}

WorkPtr GlooProcessGroup::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  EMBER_CHECK(static_cast<int>(inputs.size()) == size_, "reduce_scatter on ", setup_.name, ": expected ", size_,
              " input tensors, got ", inputs.size());
  for (const Tensor& t : inputs)
    EMBER_CHECK(t.sizes() == output.sizes() && t.dtype() == output.dtype(), "reduce_scatter on ", setup_.name,
                ": every input must match the output ", dtype_name(output.dtype()), " ", shape_str(output.sizes()),
                ", got ", dtype_name(t.dtype()), " ", shape_str(t.sizes()));
  return reduce_scatter_tensor(output, stack(inputs), op);
}

WorkPtr GlooProcessGroup::all_to_all_single(const Tensor& output, const Tensor& input) {
  EMBER_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel(), "all_to_all_single on ", setup_.name,
              ": output and input must have the same dtype and size, got ", dtype_name(output.dtype()), " ",
              shape_str(output.sizes()), " and ", dtype_name(input.dtype()), " ", shape_str(input.sizes()));
  EMBER_CHECK(input.numel() % size_ == 0, "all_to_all_single on ", setup_.name, ": ", input.numel(),
              " elements cannot be split into ", size_, " equal chunks");
  Staged in = stage_cpu(input, false, "all_to_all_single", setup_.name);
  Staged out = stage_cpu(output, true, "all_to_all_single", setup_.name);
  CollectiveInfo i = info(CollectiveKind::AllToAllSingle, &input);
  return submit(i, [this, in, out, i] {
    exchange_bytes(in.data(), out.data(), in.buffer.numel(), in.buffer.element_size(), i.sequence);
    out.finish();
  });
}

WorkPtr GlooProcessGroup::all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  EMBER_CHECK(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_, "all_to_all on ",
              setup_.name, ": expected ", size_, " inputs and outputs, got ", inputs.size(), " and ", outputs.size());
  for (int r = 0; r < size_; ++r)
    EMBER_CHECK(inputs[r].sizes() == inputs[0].sizes() && outputs[r].sizes() == inputs[0].sizes() &&
                    inputs[r].dtype() == inputs[0].dtype() && outputs[r].dtype() == inputs[0].dtype(),
                "all_to_all on ", setup_.name, ": all inputs and outputs must share one dtype and shape (",
                dtype_name(inputs[0].dtype()), " ", shape_str(inputs[0].sizes()), ")");
  for (const Tensor& t : inputs) check_cpu(t, "all_to_all", setup_.name);
  Tensor packed_in = stack(inputs);
  Tensor packed_out = empty(packed_in.sizes(), packed_in.options());
  CollectiveInfo i = info(CollectiveKind::AllToAll, &inputs[0]);
  return submit(i, [this, packed_in, packed_out, outputs, i] {
    exchange_bytes(packed_in.data_ptr(), packed_out.data_ptr(), packed_in.numel(), packed_in.element_size(),
                   i.sequence);
    NoGradGuard no_grad;
    for (size_t r = 0; r < outputs.size(); ++r) copy_into(outputs[r], packed_out.select(0, static_cast<int64_t>(r)));
  });
}

// Point-to-point: the data goes on a slot made of the tag and the pair's k-th transfer with that
// tag, so the k-th send matches the k-th recv exactly. With EMBER_DISTRIBUTED_DEBUG each send is
// preceded by its signature on a slot of its own; the receiver posts its data recv only once the
// signature matches its own, and otherwise takes the sent bytes into scratch (so the sender
// completes, as a small MPI send does) and fails naming both.
WorkPtr GlooProcessGroup::post_p2p(CollectiveKind kind, const Tensor& tensor, int peer, int tag) {
  const bool sending = kind == CollectiveKind::Send;
  const char* op = sending ? "send" : "recv";
  check_rank(peer, sending ? "destination" : "source", op);
  EMBER_CHECK(peer != rank_, op, " on ", setup_.name, ": rank ", rank_,
              sending ? " cannot send to itself" : " cannot receive from itself");
  EMBER_CHECK(tag >= 0 && tag <= kMaxTag, op, " on ", setup_.name, ": the tag must be in [0, ", kMaxTag, "], got ",
              tag);
  Staged s = stage_cpu(tensor, !sending, op, setup_.name);
  uint64_t sequence = 0;
  {
    std::lock_guard<std::mutex> lock(p2p_mutex_);
    sequence = ++p2p_sequence_[{kind, peer, tag}];
  }
  CollectiveInfo i = CollectiveInfo::of(kind, sequence, setup_.name, &tensor, ReduceOp::Sum, peer, tag);
  auto work = std::make_shared<GlooWork>(i, rank_);
  const bool check = distributed_debug();
  auto signature = std::make_shared<Signature>();
  std::memset(signature.get(), 0, sizeof(Signature));
  if (sending) *signature = signature_of(i);
  using Buffer = std::shared_ptr<::gloo::transport::UnboundBuffer>;
  Buffer signature_buffer = check ? Buffer(context_->createUnboundBuffer(signature.get(), sizeof(Signature))) : nullptr;
  auto post = [this, sending, peer](const Buffer& buffer, uint64_t key) {
    if (!buffer) return;
    if (sending)
      buffer->send(peer, key);
    else
      buffer->recv(peer, key);
  };
  const uint64_t data_key = slot(kP2pSlot, static_cast<uint64_t>(tag), sequence);
  auto data_buffer = [this](void* data, size_t bytes) {
    return bytes > 0 ? Buffer(context_->createUnboundBuffer(data, bytes)) : nullptr;
  };
  Buffer data = data_buffer(s.data(), s.buffer.nbytes());
  work->start();
  try {
    post(signature_buffer, slot(kSignatureSlot, static_cast<uint64_t>(tag), sequence));
    if (sending || !check) post(data, data_key);  // a checked recv posts once the signature agrees
  } catch (const ::gloo::Exception& e) {
    run_work(*work, [&] { fail(i, e); });
    return work;
  }
  p2p_waiters_.submit(work, [this, i, s, sending, signature, signature_buffer, data, data_key, post, data_buffer] {
    try {
      const auto timeout = gloo_timeout();
      if (sending) {
        if (signature_buffer) signature_buffer->waitSend(timeout);
        if (data) data->waitSend(timeout);
        return;
      }
      if (signature_buffer) {
        signature_buffer->waitRecv(timeout);
        if (!same_payload(signature_of(i), *signature)) {
          std::vector<uint8_t> scratch(static_cast<size_t>(signature->numel) *
                                       element_size(static_cast<DType>(signature->dtype)));
          Buffer sent = data_buffer(scratch.data(), scratch.size());
          post(sent, data_key);
          if (sent) sent->waitRecv(timeout);
          check_sent_payload(i, *signature, rank_);  // raises, naming both
        }
        post(data, data_key);
      }
      if (data) data->waitRecv(timeout);
    } catch (const ::gloo::Exception& e) {
      fail(i, e);
    }
    s.finish();
  });
  return work;
}

WorkPtr GlooProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  return post_p2p(CollectiveKind::Send, tensor, dst, tag);
}

WorkPtr GlooProcessGroup::recv(const Tensor& tensor, int src, int tag) {
  return post_p2p(CollectiveKind::Recv, tensor, src, tag);
}

WorkPtr GlooProcessGroup::barrier() {
  CollectiveInfo i = info(CollectiveKind::Barrier, nullptr);
  return submit(i, [this, i] {
    if (size_ == 1) return;
    ::gloo::BarrierOptions opts(context_);
    opts.setTag(static_cast<uint32_t>(i.sequence));
    opts.setTimeout(gloo_timeout());
    ::gloo::barrier(opts);
  });
}

std::shared_ptr<ProcessGroup> GlooProcessGroup::new_group(const std::vector<int>& ranks) {
  const int position = new_group_position(ranks, rank_, size_, setup_.name);
  uint64_t index = 0;
  {
    std::lock_guard<std::mutex> lock(p2p_mutex_);
    index = ++sub_groups_;
  }
  if (position < 0) return nullptr;
  Setup sub;
  sub.store = setup_.store;
  sub.master_host = setup_.master_host;
  for (int r : ranks) sub.world_ranks.push_back(setup_.world_ranks[r]);
  sub.name = sub_group_name(sub.world_ranks);
  sub.prefix = setup_.prefix + "group" + std::to_string(index) + "/";
  sub.rank = position;
  sub.size = static_cast<int>(ranks.size());
  return std::make_shared<GlooProcessGroup>(std::move(sub));
}

// Linking //comm/gloo is what lets comm::init() make a Gloo world.
namespace {
const bool registered = [] {
  HostBackend backend;
  backend.world = [](const LaunchEnvironment& env,
                     const std::shared_ptr<Store>& store) -> std::shared_ptr<ProcessGroup> {
    Runtime::get().set_world_rank(env.rank);
    GlooProcessGroup::Setup setup;
    setup.store = store;
    const std::optional<MasterAddress> master = master_address();
    setup.master_host = master ? master->host : "127.0.0.1";
    setup.name = "WORLD";
    setup.prefix = "gloo/WORLD/";
    setup.rank = env.rank;
    setup.size = env.world_size;
    for (int r = 0; r < env.world_size; ++r) setup.world_ranks.push_back(r);
    return std::make_shared<GlooProcessGroup>(std::move(setup));
  };
  // No job-wide abort: the peers' connections to this process close when it exits, and their
  // collectives fail naming it.
  register_host_backend("gloo", std::move(backend));
  return true;
}();
}  // namespace

}  // namespace ember::comm::gloo_backend
