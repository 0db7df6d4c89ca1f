// Construction-time agreement between ranks, state broadcasts and the used-leaf search.
#include "parallel/replica_sync.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include "autograd/node.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::parallel {

Device module_device(const nn::Module& module, int rank, const char* who) {
  std::string first;
  Device device(kCPU);
  auto visit = [&](const char* kind, const std::string& name, const Tensor& t) {
    if (!t.defined()) return;
    if (first.empty()) {
      first = std::string(kind) + " '" + name + "'";
      device = t.device();
      return;
    }
    EMBER_CHECK(t.device() == device, who, " (rank ", rank, "): the module spans several devices: ", first, " is on ",
                device, " but ", kind, " '", name, "' is on ", t.device(), "; ", who,
                " runs one device per process (move the whole module with module->to(device))");
  };
  for (auto& [name, p] : module.named_parameters()) visit("parameter", name, p);
  for (auto& [name, b] : module.named_buffers()) visit("buffer", name, b);
  return device;
}

std::vector<std::string> gather_texts(comm::ProcessGroup& group, Device device, const std::string& text) {
  // Reading the gathered bytes goes through copies to the CPU, which order after the gathers on
  // the current stream.
  const int ranks = group.size();
  const TensorOptions lengths_options = TensorOptions(kInt64).device(device);
  Tensor lengths = empty({ranks}, lengths_options);
  group.all_gather_into_tensor(lengths, full({1}, static_cast<int64_t>(text.size()), lengths_options))->wait();
  std::vector<int64_t> sizes = lengths.to_vector<int64_t>();
  const int64_t longest = std::max<int64_t>(1, *std::max_element(sizes.begin(), sizes.end()));
  Tensor padded = zeros({longest}, TensorOptions(kUInt8));
  std::memcpy(padded.data_ptr(), text.data(), text.size());
  Tensor gathered = empty({ranks * longest}, TensorOptions(kUInt8).device(device));
  group.all_gather_into_tensor(gathered, padded.to(device))->wait();
  Tensor host = gathered.to(Device(kCPU));
  const char* bytes = static_cast<const char*>(host.data_ptr());
  std::vector<std::string> texts;
  for (int r = 0; r < ranks; ++r) texts.emplace_back(bytes + r * longest, static_cast<size_t>(sizes[r]));
  return texts;
}

void verify_same_parameters(comm::ProcessGroup& group, Device device, const nn::Module& module, const char* who) {
  std::ostringstream text;
  auto params = module.named_parameters();
  for (auto& [name, p] : params) text << name << '\t' << shape_str(p.sizes()) << '\t' << dtype_name(p.dtype()) << '\n';
  std::string mine = text.str();
  std::vector<std::string> texts;
  try {
    texts = gather_texts(group, device, mine);
  } catch (const Error& e) {
    EMBER_FAIL(who, " (rank ", group.rank(), "): the module is on ", device,
               params.empty() ? std::string() : " (parameter '" + params.front().first + "')", "; process group ",
               group.name(), " failed its first collective there: ", e.what());
  }
  auto lines = [](const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  std::vector<std::string> own = lines(mine);
  for (int r = 0; r < group.size(); ++r) {
    const std::string& theirs = texts[r];
    if (theirs == mine) continue;
    std::vector<std::string> other = lines(theirs);
    size_t k = 0;
    while (k < own.size() && k < other.size() && own[k] == other[k]) ++k;
    auto pretty = [](const std::string& line) {
      std::string s = line;
      std::replace(s.begin(), s.end(), '\t', ' ');
      return s.empty() ? std::string("(nothing)") : s;
    };
    EMBER_FAIL(who, ": ranks registered different parameters (", own.size(), " on rank ", group.rank(), ", ",
               other.size(), " on rank ", r, "); first difference at parameter #", k, ": rank ", group.rank(), " has ",
               pretty(k < own.size() ? own[k] : ""), ", rank ", r, " has ", pretty(k < other.size() ? other[k] : ""));
  }
}

void broadcast_tensors(comm::ProcessGroup& group, const std::vector<Tensor>& tensors, int root) {
  // Few large messages beat many small ones.
  NoGradGuard no_grad;
  std::vector<DType> dtypes;
  for (const Tensor& t : tensors)
    if (std::find(dtypes.begin(), dtypes.end(), t.dtype()) == dtypes.end()) dtypes.push_back(t.dtype());
  for (DType dtype : dtypes) {
    std::vector<Tensor> same;
    for (const Tensor& t : tensors)
      if (t.dtype() == dtype && t.numel() > 0) same.push_back(t);
    if (same.empty()) continue;
    std::vector<Tensor> flat_parts;
    for (const Tensor& t : same) flat_parts.push_back(t.detach().reshape({-1}));
    Tensor flat = cat(flat_parts);
    group.broadcast(flat, root)->wait();
    int64_t offset = 0;
    for (const Tensor& t : same) {
      Tensor target = t.detach();
      copy_into(target, flat.narrow(0, offset, t.numel()).view(t.sizes()));
      target.bump_version();
      offset += t.numel();
    }
  }
}

std::vector<const TensorImpl*> reachable_leaves(const std::vector<Tensor>& outputs) {
  std::vector<const TensorImpl*> leaves;
  std::vector<autograd::Node*> stack;
  std::unordered_map<autograd::Node*, bool> seen;
  for (const Tensor& out : outputs) {
    if (!out.defined() || !out.requires_grad()) continue;
    if (out.grad_fn())
      stack.push_back(out.grad_fn().get());
    else
      leaves.push_back(out.unsafe_impl());
  }
  while (!stack.empty()) {
    autograd::Node* node = stack.back();
    stack.pop_back();
    if (seen[node]) continue;
    seen[node] = true;
    if (auto* acc = dynamic_cast<autograd::AccumulateGrad*>(node)) leaves.push_back(acc->leaf().unsafe_impl());
    for (const autograd::Edge& edge : node->next_edges())
      if (edge.valid()) stack.push_back(edge.function.get());
  }
  return leaves;
}

}  // namespace ember::parallel
