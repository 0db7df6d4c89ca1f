// Shared: named tensors (in shared memory), queues and settings for the workers of spawn.
#include "parallel/multiprocessing/shared.h"

#include <sstream>

#include "core/error.h"
#include "parallel/multiprocessing/queue_ends.h"
#include "parallel/multiprocessing/shared_wire.h"

namespace ember::multiprocessing {

namespace {

void check_shared(const std::string& name, const Tensor& t) {
  EMBER_CHECK(t.defined(), "Shared.add: tensor '", name, "' is undefined");
  EMBER_CHECK(t.is_shared(), "Shared.add: tensor '", name,
              "' is not in shared memory (the workers would not see the same memory); call share_memory_() "
              "on it, or Module::share_memory() on its module, first");
}

}  // namespace

Shared& Shared::add(const std::string& name, const Tensor& tensor) {
  check_shared(name, tensor);
  tensors_[name] = tensor;
  return *this;
}

Shared& Shared::add(const std::string& name, const nn::Module& module) {
  for (const auto& [key, t] : module.named_parameters()) {
    check_shared(name + "." + key, t);
    tensors_[name + "." + key] = t;
  }
  for (const auto& [key, t] : module.named_buffers()) {
    if (!t.defined()) continue;
    check_shared(name + "." + key, t);
    tensors_[name + "." + key] = t;
  }
  return *this;
}

Shared& Shared::add(const std::string& name, const Queue& queue) {
  queues_[name] = queue;
  return *this;
}

Shared& Shared::set(const std::string& name, const std::string& value) {
  strings_[name] = value;
  return *this;
}

namespace {
template <typename Map>
std::string known_names(const Map& map) {
  std::ostringstream out;
  size_t shown = 0;
  for (const auto& entry : map) {
    if (shown++ == 8) {
      out << ", ...";
      break;
    }
    out << (shown > 1 ? ", " : "") << "'" << entry.first << "'";
  }
  return shown == 0 ? "none" : out.str();
}
}  // namespace

Tensor Shared::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  EMBER_CHECK(it != tensors_.end(), "Shared.tensor: no tensor named '", name,
              "' was shared (shared: ", known_names(tensors_), ")");
  return it->second;
}

Queue Shared::queue(const std::string& name) const {
  auto it = queues_.find(name);
  EMBER_CHECK(it != queues_.end(), "Shared.queue: no queue named '", name,
              "' was shared (shared: ", known_names(queues_), ")");
  return it->second;
}

const std::string& Shared::get(const std::string& name) const {
  auto it = strings_.find(name);
  EMBER_CHECK(it != strings_.end(), "Shared.get: no setting named '", name,
              "' was shared (shared: ", known_names(strings_), ")");
  return it->second;
}

void Shared::attach(const std::string& name, nn::Module& module) const {
  const std::string prefix = name + ".";
  std::vector<std::pair<std::string, Tensor>> own = module.named_parameters();
  for (auto& entry : module.named_buffers()) {
    if (entry.second.defined()) own.push_back(entry);
  }
  std::ostringstream problems;
  std::map<std::string, bool> used;
  for (const auto& [key, t] : own) {
    auto it = tensors_.find(prefix + key);
    if (it == tensors_.end()) {
      problems << "\n  missing: '" << key << "'";
      continue;
    }
    used[it->first] = true;
    const Tensor& s = it->second;
    if (s.sizes() != t.sizes() || s.dtype() != t.dtype()) {
      problems << "\n  '" << key << "': the worker's is " << shape_str(t.sizes()) << " " << dtype_name(t.dtype())
               << ", the shared one " << shape_str(s.sizes()) << " " << dtype_name(s.dtype());
    }
  }
  for (auto it = tensors_.lower_bound(prefix); it != tensors_.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    if (!used.count(it->first)) problems << "\n  unexpected: '" << it->first.substr(prefix.size()) << "'";
  }
  const std::string found = problems.str();
  EMBER_CHECK(found.empty(), "Shared.attach: the module does not match the shared module '", name, "':", found);
  for (const auto& [key, t] : own) t.set_data(tensors_.at(prefix + key));
}

namespace detail {

Message encode_shared(const Shared& shared) {
  Writer w;
  w.u64(shared.tensors().size());
  for (const auto& [name, t] : shared.tensors()) {
    w.text(name);
    w.tensor(t);
  }
  w.u64(shared.queues().size());
  for (const auto& [name, q] : shared.queues()) {
    w.text(name);
    w.u64(w.fd(q.ends()->put_fd));
    w.u64(w.fd(q.ends()->get_fd));
  }
  w.u64(shared.strings().size());
  for (const auto& [name, value] : shared.strings()) {
    w.text(name);
    w.text(value);
  }
  return w.finish();
}

Shared decode_shared(Message& message) {
  Shared shared;
  Reader r(message, "spawn");
  for (uint64_t n = r.u64(); n > 0; --n) {
    std::string name = r.text();
    shared.mutable_tensors()[name] = r.tensor();
  }
  for (uint64_t n = r.u64(); n > 0; --n) {
    std::string name = r.text();
    const uint64_t put = r.u64(), get = r.u64();
    const int put_fd = r.take_fd(put), get_fd = r.take_fd(get);
    shared.mutable_queues()[name] = Queue(std::make_shared<Queue::Ends>(put_fd, get_fd));
  }
  for (uint64_t n = r.u64(); n > 0; --n) {
    std::string name = r.text();
    shared.mutable_strings()[name] = r.text();
  }
  return shared;
}

}  // namespace detail

}  // namespace ember::multiprocessing
