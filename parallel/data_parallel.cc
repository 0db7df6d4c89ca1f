// DataParallel's forward (split, refresh, run, gather) and the node that runs each replica's
// backward on that replica's thread.
//
// Why the backward runs per replica: one engine thread walking every replica's graph would
// launch their kernels one device after another, and SyncBatchNorm across replicas could not
// work at all (each replica's backward must meet the others' halfway). So the replicas' results
// become the outputs of one ReplicaBackward node, and its apply() runs a backward pass per
// replica, at once, on the replica threads; those passes end in the master's parameters (through
// the copies that made each replica's parameters) and in the input chunks' leaves.
#include "parallel/data_parallel.h"

#include <algorithm>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/node.h"
#include "core/runtime.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::parallel {

struct DataParallel::Replica {
  std::shared_ptr<nn::Module> module;
  std::vector<Tensor> parameters;  // in the master's order
  std::vector<Tensor> buffers;
  std::vector<std::shared_ptr<nn::Module>> modules;
};

namespace {

void add_unique(std::vector<Device>& devices, Device d) {
  if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
}

class ReplicaBackward final : public autograd::Node {
 public:
  ReplicaBackward(std::shared_ptr<ReplicaThreads> threads, std::vector<Tensor> roots, std::vector<Tensor> chunks,
                  std::vector<Device> stream_devices, Device input_device, int64_t dim)
      : threads_(std::move(threads)),
        roots_(std::move(roots)),
        chunks_(std::move(chunks)),
        stream_devices_(std::move(stream_devices)),
        input_device_(input_device),
        dim_(dim) {}

  std::string name() const override { return "DataParallelBackward"; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const std::optional<autograd::PassInfo> pass = autograd::current_pass();
    EMBER_CHECK(pass.has_value() && pass->accumulate,
                "DataParallel: autograd::grad() cannot differentiate through "
                "DataParallel (its replicas' backward accumulates into the parameters' .grad); call backward()");
    const size_t count = roots_.size();
    threads_->run(count, stream_devices_, [&](size_t k) {
      if (roots_[k].requires_grad()) autograd::backward({roots_[k]}, {grads[k]}, pass->retain_graph);
    });
    std::vector<Tensor> input_grads(next_edges().size());
    if (!input_grads.empty() && next_edges()[0].valid()) {
      std::vector<Tensor> parts;
      for (size_t k = 0; k < count; ++k) {
        Tensor g = chunks_[k].grad();
        if (!g.defined()) g = zeros(chunks_[k].sizes(), TensorOptions(chunks_[k].dtype()).device(chunks_[k].device()));
        parts.push_back(g.to(input_device_));
        if (pass->retain_graph) chunks_[k].mutable_grad() = Tensor();  // the next pass starts from zero
      }
      input_grads[0] = parts.size() == 1 ? parts[0] : cat(parts, dim_);
    }
    return input_grads;
  }

  void release_saved() override {
    roots_.clear();
    chunks_.clear();
  }

 private:
  std::shared_ptr<ReplicaThreads> threads_;
  std::vector<Tensor> roots_;
  std::vector<Tensor> chunks_;  // the replicas' input leaves, when the input needs a gradient
  std::vector<Device> stream_devices_;
  Device input_device_;
  int64_t dim_;
};

std::string device_list(const std::vector<Device>& devices) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < devices.size(); ++i) out << (i ? ", " : "") << devices[i];
  out << "]";
  return out.str();
}

}  // namespace

DataParallel::DataParallel(std::shared_ptr<nn::Module> module, std::vector<Device> device_ids,
                           std::optional<Device> output_device, int64_t dim)
    : Module("DataParallel"), module_(std::move(module)), devices_(std::move(device_ids)), dim_(dim) {
  EMBER_CHECK(module_ != nullptr, "DataParallel: the module is null");
  if (devices_.empty()) {
    EMBER_CHECK(has_backend(kCUDA),
                "DataParallel: no device_ids given and no CUDA backend in this program (link "
                "//cuda)");
    const int count = device_count(kCUDA);
    EMBER_CHECK(count > 0, "DataParallel: no device_ids given and no CUDA device is available");
    for (int i = 0; i < count; ++i) devices_.push_back(Device::cuda(i));
  }
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Device d = devices_[i];
    EMBER_CHECK(d.is_cuda(), "DataParallel: device_ids[", i, "] is ", d,
                "; DataParallel replicates onto CUDA "
                "devices (for CPU training use the module itself, or DDP with one process per core group)");
    try {
      runtime_for(d, "DataParallel");
    } catch (const Error& e) {
      EMBER_FAIL("DataParallel: device_ids[", i, "] is ", d, ", which is not available: ", e.what());
    }
    for (size_t j = 0; j < i; ++j)
      EMBER_CHECK(devices_[j] != d, "DataParallel: device_ids lists ", d, " twice (entries ", j, " and ", i, ")");
  }
  output_device_ = output_device.value_or(devices_[0]);
  if (output_device_.is_cuda()) runtime_for(output_device_, "DataParallel (output_device)");
  auto check_on_first = [&](const char* kind, const std::string& name, const Tensor& t) {
    EMBER_CHECK(!t.defined() || t.device() == devices_[0], "DataParallel: ", kind, " '", name, "' is on ", t.device(),
                ", but the module must be on device_ids[0] = ", devices_[0], " (call module->to(", devices_[0],
                ") first)");
  };
  for (auto& [name, p] : module_->named_parameters()) check_on_first("parameter", name, p);
  for (auto& [name, b] : module_->named_buffers()) check_on_first("buffer", name, b);
  register_module("module", module_);
  replicas_.resize(devices_.size());
  for (size_t k = 1; k < devices_.size(); ++k) {
    auto r = std::make_unique<Replica>();
    try {
      r->module = module_->clone(devices_[k]);
    } catch (const Error& e) {
      EMBER_FAIL("DataParallel: cannot replicate the module onto ", devices_[k], ": ", e.what());
    }
    r->parameters = r->module->parameters();
    r->buffers = r->module->buffers();
    r->modules = r->module->modules();
    replicas_[k] = std::move(r);
  }
  threads_ = std::make_shared<ReplicaThreads>(devices_, "DataParallel");
}

DataParallel::~DataParallel() = default;

std::shared_ptr<nn::Module> DataParallel::replica(size_t k) const {
  EMBER_CHECK(k < devices_.size(), "DataParallel::replica: there are ", devices_.size(), " replicas, asked for ", k);
  return k == 0 ? module_ : replicas_[k]->module;
}

std::vector<int64_t> balanced_split(int64_t size, int64_t parts) {
  const int64_t n = std::min(parts, size);
  std::vector<int64_t> sizes(static_cast<size_t>(n), size / n);
  for (int64_t i = 0; i < size % n; ++i) ++sizes[static_cast<size_t>(i)];
  return sizes;
}

std::vector<Device> DataParallel::stream_devices(size_t count) const {
  std::vector<Device> out(devices_.begin(), devices_.begin() + static_cast<std::ptrdiff_t>(count));
  if (output_device_.is_cuda()) add_unique(out, output_device_);
  add_unique(out, devices_[0]);  // where the master parameters' copies start
  return out;
}

void DataParallel::refresh(size_t k, const Master& m) {
  Replica& r = *replicas_[k];
  const Device device = devices_[k];
  const std::vector<Tensor>& master = m.parameters;
  for (size_t i = 0; i < master.size(); ++i) {
    // A differentiable copy: its backward carries replica k's gradient to the master's .grad.
    r.parameters[i].rebind_with_history(master[i].to(device));
  }
  {
    NoGradGuard no_grad;
    const std::vector<Tensor>& buffers = m.buffers;
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (buffers[i].defined()) r.buffers[i].copy_(buffers[i]);
    }
  }
  // Training flags module by module (a parent's train() resets its children, so in order).
  for (size_t i = 0; i < m.modules.size(); ++i) r.modules[i]->train(m.modules[i]->is_training());
}

std::vector<Tensor> DataParallel::run_replicas(const Tensor& input, const std::vector<int64_t>& sizes,
                                               const std::function<Tensor(size_t, const Tensor&)>& body) {
  const size_t count = sizes.size();
  // The replicas must still mirror the master (a module changed after wrapping is an error, not
  // a silently stale replica).
  const Master m{module_->parameters(), module_->buffers(), module_->modules()};
  const std::vector<Tensor>& master = m.parameters;
  const size_t master_buffers = m.buffers.size();
  const size_t master_modules = m.modules.size();
  for (size_t k = 1; k < count; ++k) {
    const Replica& r = *replicas_[k];
    EMBER_CHECK(r.parameters.size() == master.size() && r.buffers.size() == master_buffers &&
                    r.modules.size() == master_modules,
                "DataParallel: the module changed after it was wrapped (", master.size(), " parameters, ",
                master_buffers, " buffers, ", master_modules, " modules; its replicas have ", r.parameters.size(), ", ",
                r.buffers.size(), ", ", r.modules.size(), "); wrap it again");
  }
  for (const Tensor& p : master) {
    EMBER_CHECK(p.device() == devices_[0], "DataParallel: the module's parameters moved to ", p.device(),
                "; they must stay on device_ids[0] = ", devices_[0]);
  }
  // Each leaf's gradient sink is made once, here: the replica threads all connect to it at once.
  std::vector<std::shared_ptr<autograd::Node>> sinks;
  if (GradMode::is_enabled()) {
    for (const Tensor& p : master)
      if (p.requires_grad() && p.is_leaf()) sinks.push_back(autograd::grad_accumulator(p));
  }
  std::vector<int64_t> offsets(count, 0);
  for (size_t k = 1; k < count; ++k) offsets[k] = offsets[k - 1] + sizes[k - 1];
  const bool input_grad = GradMode::is_enabled() && input.requires_grad();
  std::vector<Tensor> results(count), chunks(count);
  threads_->run(count, stream_devices(count), [&](size_t k) {
    if (k > 0) refresh(k, m);
    Tensor x = input.detach().narrow(dim_, offsets[k], sizes[k]).to(devices_[k]);
    if (input_grad) {
      x = x.detach();
      x.requires_grad_(true);
      chunks[k] = x;
    }
    results[k] = body(k, x);
  });
  last_count_ = count;
  bool any_grad = false;
  for (const Tensor& r : results) any_grad = any_grad || (r.defined() && r.requires_grad());
  if (!GradMode::is_enabled() || !any_grad) return results;
  std::vector<Device> backward_devices = stream_devices(count);
  if (input.device().is_cuda()) add_unique(backward_devices, input.device());
  auto node =
      std::make_shared<ReplicaBackward>(threads_, results, chunks, std::move(backward_devices), input.device(), dim_);
  autograd::connect(node, {input_grad ? &input : nullptr});
  std::vector<Tensor> outs;
  for (const Tensor& r : results) outs.push_back(r.detach());
  return autograd::attach(node, std::move(outs));
}

Tensor DataParallel::forward(const Tensor& input) {
  EMBER_CHECK(input.defined(), "DataParallel::forward: the input is undefined");
  EMBER_CHECK(dim_ >= 0 && dim_ < input.dim(), "DataParallel::forward: cannot split along dim ", dim_,
              " an input of shape ", shape_str(input.sizes()));
  EMBER_CHECK(input.size(dim_) > 0, "DataParallel::forward: the input is empty along dim ", dim_, " (shape ",
              shape_str(input.sizes()), ")");
  const std::vector<int64_t> sizes = balanced_split(input.size(dim_), static_cast<int64_t>(devices_.size()));
  std::vector<Tensor> outputs = run_replicas(input, sizes, [&](size_t k, const Tensor& x) {
    return k == 0 ? module_->forward(x) : replicas_[k]->module->forward(x);
  });
  std::vector<Tensor> gathered;
  for (size_t k = 0; k < outputs.size(); ++k) {
    EMBER_CHECK(outputs[k].defined() && outputs[k].dim() > dim_, "DataParallel::forward: replica ", k, " on ",
                devices_[k], " returned ",
                outputs[k].defined() ? shape_str(outputs[k].sizes()) : std::string("nothing"),
                ", which cannot be gathered along dim ", dim_, " (use forward_loss for scalar results)");
    gathered.push_back(outputs[k].to(output_device_));
  }
  return gathered.size() == 1 ? gathered[0] : cat(gathered, dim_);
}

ReplicaLoss DataParallel::forward_loss(const Tensor& input, const Tensor& target, const ReplicaLossFn& loss_fn,
                                       LossReduction reduction, const ReplicaLossFn& metric) {
  EMBER_CHECK(input.defined() && target.defined(), "DataParallel::forward_loss: the input or target is undefined");
  EMBER_CHECK(loss_fn != nullptr, "DataParallel::forward_loss: the loss function is empty");
  EMBER_CHECK(dim_ >= 0 && dim_ < input.dim() && dim_ < target.dim(),
              "DataParallel::forward_loss: cannot split "
              "along dim ",
              dim_, " an input of shape ", shape_str(input.sizes()), " and a target of shape ",
              shape_str(target.sizes()));
  const int64_t batch = input.size(dim_);
  EMBER_CHECK(batch > 0, "DataParallel::forward_loss: the input is empty along dim ", dim_);
  EMBER_CHECK(target.size(dim_) == batch, "DataParallel::forward_loss: the input has ", batch, " samples along dim ",
              dim_, " but the target has ", target.size(dim_), " (shapes ", shape_str(input.sizes()), " and ",
              shape_str(target.sizes()), ")");
  const std::vector<int64_t> sizes = balanced_split(batch, static_cast<int64_t>(devices_.size()));
  std::vector<int64_t> offsets(sizes.size(), 0);
  for (size_t k = 1; k < sizes.size(); ++k) offsets[k] = offsets[k - 1] + sizes[k - 1];
  std::vector<Tensor> metrics(sizes.size());
  std::vector<Tensor> losses = run_replicas(input, sizes, [&](size_t k, const Tensor& x) {
    Tensor t = target.detach().narrow(dim_, offsets[k], sizes[k]).to(devices_[k]);
    Tensor out = k == 0 ? module_->forward(x) : replicas_[k]->module->forward(x);
    Tensor loss = loss_fn(out, t);
    EMBER_CHECK(loss.defined() && loss.numel() == 1, "DataParallel::forward_loss: the loss function returned ",
                loss.defined() ? shape_str(loss.sizes()) : std::string("nothing"), " on replica ", k,
                "; expected a scalar");
    if (metric) {
      NoGradGuard no_grad;
      metrics[k] = metric(out.detach(), t);
    }
    return loss.reshape({});
  });
  ReplicaLoss result;
  for (size_t k = 0; k < losses.size(); ++k) {
    Tensor part = losses[k].to(output_device_);
    if (reduction == LossReduction::kMean && losses.size() > 1) {
      part = part * (static_cast<double>(sizes[k]) / static_cast<double>(batch));
    }
    result.loss = k == 0 ? part : result.loss + part;
  }
  if (metric) {
    NoGradGuard no_grad;
    for (size_t k = 0; k < metrics.size(); ++k) {
      EMBER_CHECK(metrics[k].defined(), "DataParallel::forward_loss: the metric function returned nothing on replica ",
                  k);
      Tensor m = metrics[k].to(output_device_);
      result.metric = k == 0 ? m : result.metric + m;
    }
  }
  return result;
}

std::vector<std::pair<std::string, Tensor>> DataParallel::named_parameters(bool recurse) const {
  return module_->named_parameters(recurse);
}

std::vector<std::pair<std::string, Tensor>> DataParallel::named_buffers(bool recurse) const {
  return module_->named_buffers(recurse);
}

NamedTensors DataParallel::state_dict() const { return module_->state_dict(); }

nn::LoadResult DataParallel::load_state_dict(const NamedTensors& state, bool strict) {
  return module_->load_state_dict(state, strict);
}

std::string DataParallel::extra_repr() const {
  std::ostringstream out;
  out << "device_ids=" << device_list(devices_) << ", output_device=" << output_device_ << ", dim=" << dim_;
  return out.str();
}

}  // namespace ember::parallel
