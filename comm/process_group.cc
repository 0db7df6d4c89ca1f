// Names and descriptions used in every distributed error message, and the environment knobs.
#include "comm/process_group.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace ember::comm {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Product:
      return "product";
  }
  return "?";
}

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce:
      return "all_reduce";
    case CollectiveKind::Broadcast:
      return "broadcast";
    case CollectiveKind::Reduce:
      return "reduce";
    case CollectiveKind::AllGather:
      return "all_gather";
    case CollectiveKind::AllGatherIntoTensor:
      return "all_gather_into_tensor";
    case CollectiveKind::ReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::ReduceScatterTensor:
      return "reduce_scatter_tensor";
    case CollectiveKind::AllToAll:
      return "all_to_all";
    case CollectiveKind::AllToAllSingle:
      return "all_to_all_single";
    case CollectiveKind::Send:
      return "send";
    case CollectiveKind::Recv:
      return "recv";
    case CollectiveKind::Barrier:
      return "barrier";
  }
  return "?";
}

std::string CollectiveInfo::describe() const {
  std::ostringstream out;
  out << collective_name(kind) << " #" << sequence;
  bool reduces = kind == CollectiveKind::AllReduce || kind == CollectiveKind::Reduce ||
                 kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::ReduceScatterTensor;
  if (reduces) out << " (" << reduce_op_name(op) << ")";
  out << " on " << group;
  if (kind != CollectiveKind::Barrier) out << ", " << dtype_name(dtype) << " " << shape_str(shape);
  if (peer >= 0) {
    bool p2p = kind == CollectiveKind::Send || kind == CollectiveKind::Recv;
    out << (p2p ? (kind == CollectiveKind::Send ? ", to rank " : ", from rank ") : ", root ") << peer;
    if (p2p && tag >= 0) out << ", tag " << tag;
  }
  if (non_blocking) out << ", non-blocking (inside an OverlapScope)";
  return out.str();
}

CollectiveInfo CollectiveInfo::of(CollectiveKind kind, uint64_t sequence, const std::string& group,
                                  const Tensor* tensor, ReduceOp op, int peer, int tag) {
  CollectiveInfo i;
  i.kind = kind;
  i.sequence = sequence;
  i.group = group;
  if (tensor) {
    i.dtype = tensor->dtype();
    i.shape = tensor->sizes();
  }
  i.op = op;
  i.peer = peer;
  i.tag = tag;
  return i;
}

int new_group_position(const std::vector<int>& ranks, int rank, int size, const std::string& group) {
  EMBER_CHECK(!ranks.empty(), "new_group on ", group, ": the rank list is empty");
  std::vector<bool> seen(size, false);
  int position = -1;
  for (size_t k = 0; k < ranks.size(); ++k) {
    const int r = ranks[k];
    EMBER_CHECK(r >= 0 && r < size, "new_group on ", group, ": member rank ", r, " is outside the group of size ",
                size);
    EMBER_CHECK(!seen[r], "new_group on ", group, ": rank ", r, " is listed twice");
    seen[r] = true;
    if (r == rank) position = static_cast<int>(k);
  }
  return position;
}

std::string sub_group_name(const std::vector<int>& world_ranks) {
  std::ostringstream name;
  name << "group(";
  for (size_t k = 0; k < world_ranks.size(); ++k) name << (k ? "," : "") << world_ranks[k];
  name << ")";
  return name.str();
}

std::string format_seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

std::chrono::milliseconds collective_timeout() {
  static const std::chrono::milliseconds timeout = [] {
    const char* env = std::getenv("EMBER_COLLECTIVE_TIMEOUT");
    if (env == nullptr || *env == '\0') return std::chrono::milliseconds(600'000);
    char* end = nullptr;
    double seconds = std::strtod(env, &end);
    EMBER_CHECK(end != env && *end == '\0' && seconds > 0,
                "EMBER_COLLECTIVE_TIMEOUT: expected a positive number "
                "of seconds, got '",
                env, "'");
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
  }();
  return timeout;
}

namespace {
thread_local int overlap_depth = 0;
}  // namespace

OverlapScope::OverlapScope() { ++overlap_depth; }
OverlapScope::~OverlapScope() { --overlap_depth; }
bool OverlapScope::active() { return overlap_depth > 0; }

bool distributed_debug() {
  static const bool debug = [] {
    const char* env = std::getenv("EMBER_DISTRIBUTED_DEBUG");
    return env != nullptr && std::string(env) == "1";
  }();
  return debug;
}

std::string timed_out_message(const CollectiveInfo& info, std::chrono::milliseconds timeout) {
  std::string what =
      info.describe() + " did not complete within " + format_seconds(timeout) + " (EMBER_COLLECTIVE_TIMEOUT); ";
  if (info.kind == CollectiveKind::Send || info.kind == CollectiveKind::Recv)
    return what + "rank " + std::to_string(info.peer) + " of " + info.group + " never posted the matching " +
           (info.kind == CollectiveKind::Send ? "recv" : "send") + " with this tag, or is gone. Aborting the job.";
  return what +
         "the other ranks are stuck elsewhere or gone. Aborting the job. With EMBER_DISTRIBUTED_DEBUG=1 "
         "ranks compare their collectives and name the first mismatch.";
}

std::string terminated_message(int rank, const std::string& oldest, const std::vector<std::string>& others) {
  // The oldest is what every later one waits behind: a rank that died took its part of it along.
  std::string text = "[rank " + std::to_string(rank) + "] ember: terminated while in " + oldest;
  if (!others.empty()) {
    text += " (also in flight:";
    for (size_t i = 0; i < others.size() && i < 5; ++i) text += (i > 0 ? ", " : " ") + others[i];
    if (others.size() > 5) text += ", and " + std::to_string(others.size() - 5) + " more";
    text += ")";
  }
  return text + "; another rank probably failed or exited early (see its output)\n";
}

}  // namespace ember::comm
