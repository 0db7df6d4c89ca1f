// DataParallel: one process driving several GPUs, in the shape of PyTorch's nn.DataParallel
// without its faults (the replicas are made once, and the loss need not be computed on one GPU).
//
//   model->to(Device::cuda(0));
//   auto dp = std::make_shared<ember::parallel::DataParallel>(model, std::vector<Device>{
//       Device::cuda(0), Device::cuda(1)});
//   // Recommended: the loss runs inside each replica; only the scalar losses meet on cuda:0.
//   Tensor loss = dp->forward_loss(x, y, [](const Tensor& out, const Tensor& t) {
//     return ember::cross_entropy(out, t);
//   }).loss;
//   loss.backward();    // gradients land summed on model's parameters, on cuda:0
//   optimizer.step();   // an optimizer over model->parameters(), exactly as without DataParallel
//
// Each forward splits the batch along `dim` (sizes differ by at most one; a batch smaller than
// the device count runs that many replicas), refreshes the replicas' parameters and buffers from
// the master module on device_ids[0] (replica 0 is the master itself), runs every replica at
// once on its own host thread with the caller's stream on its device, and, for forward(),
// gathers the outputs to output_device. The backward runs each replica's part of the graph on
// that replica's thread too, and the parameters' gradients flow back to the master through the
// copies that made the replicas' parameters.
//
// BatchNorm as in PyTorch's DataParallel: each replica normalises with its own chunk's
// statistics, and the running statistics are replica 0's (the master's). After
// convert_sync_batchnorm(*model) (no process group) the replicas share the whole batch's
// statistics instead, which PyTorch's DataParallel cannot do.
//
// state_dict() has the bare module's keys (no "module." prefix): a DataParallel checkpoint loads
// into a bare model, into DDP, and onto any device.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "parallel/replica_threads.h"

namespace ember::parallel {

// How forward_loss combines the replicas' losses: kMean weights each by its share of the batch
// (for losses that average over the batch), kSum adds them (for summed losses). Either way the
// result is what the loss function would give on the whole batch.
enum class LossReduction { kMean, kSum };

// Sizes splitting `size` into min(parts, size) pieces that differ by at most one, the larger
// first: DataParallel's chunks and a Pipeline's micro-batches.
std::vector<int64_t> balanced_split(int64_t size, int64_t parts);

// Runs on each replica's thread with that replica's output and its chunk of the target.
using ReplicaLossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;

struct ReplicaLoss {
  Tensor loss;    // on output_device, a scalar; backward() from it trains as the whole-batch loss
  Tensor metric;  // the metric function's results, summed over replicas (no gradient), if given
};

class DataParallel : public nn::Module {
 public:
  // device_ids: CUDA devices, all of them when empty; output_device: device_ids[0] when unset.
  // The module's parameters and buffers must be on device_ids[0].
  DataParallel(std::shared_ptr<nn::Module> module, std::vector<Device> device_ids = {},
               std::optional<Device> output_device = std::nullopt, int64_t dim = 0);
  ~DataParallel() override;

  // The replicas' outputs concatenated along dim on output_device.
  Tensor forward(const Tensor& input) override;
  // The recommended mode: `loss_fn` runs in each replica on its output and target chunk (the
  // target is split like the input); only the replicas' scalar losses are combined on
  // output_device, so nothing batch-sized gathers on one device. `metric` (e.g. the count of
  // correct predictions) runs in each replica too, without gradient, and its results are summed.
  ReplicaLoss forward_loss(const Tensor& input, const Tensor& target, const ReplicaLossFn& loss_fn,
                           LossReduction reduction = LossReduction::kMean, const ReplicaLossFn& metric = nullptr);

  const std::shared_ptr<nn::Module>& module() const { return module_; }
  const std::vector<Device>& device_ids() const { return devices_; }
  Device output_device() const { return output_device_; }
  int64_t dim() const { return dim_; }
  // How many replicas the last forward ran (fewer than the devices for a small batch).
  size_t last_replica_count() const { return last_count_; }
  // Replica k (k >= 1) of the module, on device_ids[k]; replica 0 is module().
  std::shared_ptr<nn::Module> replica(size_t k) const;

  // The wrapped module's view of parameters, buffers and state (no prefix).
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const override;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const override;
  NamedTensors state_dict() const override;
  nn::LoadResult load_state_dict(const NamedTensors& state, bool strict = true) override;
  std::string extra_repr() const override;

 private:
  struct Replica;
  // The master module's parameters, buffers and modules, listed once per forward.
  struct Master {
    std::vector<Tensor> parameters;
    std::vector<Tensor> buffers;
    std::vector<std::shared_ptr<nn::Module>> modules;
  };
  // Makes the replicas match the master: parameter copies that carry the gradient back,
  // buffers, training flags. Runs on replica k's thread.
  void refresh(size_t k, const Master& master);
  // Runs `body(k, chunk)` on each replica with its input chunk on its device; returns the
  // replicas' results after hooking their backward onto the replicas' threads.
  std::vector<Tensor> run_replicas(const Tensor& input, const std::vector<int64_t>& sizes,
                                   const std::function<Tensor(size_t, const Tensor&)>& body);
  std::vector<Device> stream_devices(size_t count) const;

  std::shared_ptr<nn::Module> module_;
  std::vector<Device> devices_;
  Device output_device_;
  int64_t dim_;
  std::vector<std::unique_ptr<Replica>> replicas_;  // [k] for k >= 1; [0] is empty
  std::shared_ptr<ReplicaThreads> threads_;         // shared with the backward nodes
  size_t last_count_ = 0;
};

}  // namespace ember::parallel
