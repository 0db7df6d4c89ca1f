// Rank 0's decisions reach the others as JSON bytes (share_from), after an all-reduce that tells
// every rank whether any has a new one.
#include "comm/kernel_agreement.h"

#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "comm/device_backend.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/io/json.h"
#include "core/kernel_select.h"

namespace ember::comm {

namespace {
// The process's count of decided keys when the ranks last agreed.
std::atomic<size_t> agreed_count{0};
}  // namespace

bool kernel_decisions_changed() { return kernel_select::decision_count() != agreed_count.load(); }

void share_kernel_decisions(ProcessGroup& group, Device device) {
  NoGradGuard no_grad;
  std::string text;
  if (group.rank() == 0) {
    std::vector<std::pair<std::string, json::Value>> members;
    for (const auto& [key, name] : kernel_select::in_force()) members.emplace_back(key, json::Value::string(name));
    text = json::Value::object(std::move(members)).dump();
  }
  uint64_t size = text.size();
  std::vector<uint8_t> size_bytes(sizeof(size));
  std::memcpy(size_bytes.data(), &size, sizeof(size));
  share_from(group, device, 0, size_bytes);
  std::memcpy(&size, size_bytes.data(), sizeof(size));
  std::vector<uint8_t> bytes(text.begin(), text.end());
  bytes.resize(size);
  share_from(group, device, 0, bytes);
  if (group.rank() != 0) {
    const json::Value decisions =
        json::parse(std::string(bytes.begin(), bytes.end()), "share_kernel_decisions: rank 0's kernel decisions");
    std::map<std::string, std::string> adopted;
    for (const auto& [key, name] : decisions.members()) adopted[key] = name.as_string();
    kernel_select::adopt(adopted);
  }
  agreed_count.store(kernel_select::decision_count());
}

}  // namespace ember::comm
