#include "comm/signature.h"

#include <cstring>

#include "core/error.h"

namespace ember::comm {

Signature signature_of(const CollectiveInfo& info) {
  Signature s;
  std::memset(&s, 0, sizeof(s));
  s.kind = static_cast<int32_t>(info.kind);
  s.op = static_cast<int32_t>(info.op);
  s.dtype = static_cast<int32_t>(info.dtype);
  s.ndim = static_cast<int32_t>(info.shape.size());
  for (size_t i = 0; i < info.shape.size() && i < 8; ++i) s.shape[i] = info.shape[i];
  s.numel = shape_numel(info.shape);
  s.peer = info.peer;
  s.tag = info.tag;
  s.sequence = info.sequence;
  s.non_blocking = info.non_blocking;
  return s;
}

std::string describe_signature(const Signature& s, const std::string& group) {
  CollectiveInfo info;
  info.kind = static_cast<CollectiveKind>(s.kind);
  info.op = static_cast<ReduceOp>(s.op);
  info.dtype = static_cast<DType>(s.dtype);
  for (int i = 0; i < s.ndim && i < 8; ++i) info.shape.push_back(s.shape[i]);
  info.peer = s.peer;
  info.tag = s.tag;
  info.sequence = s.sequence;
  info.non_blocking = s.non_blocking != 0;
  info.group = group;
  return info.describe();
}

void check_same_collective(const CollectiveInfo& info, const std::vector<Signature>& all, int rank) {
  const Signature mine = signature_of(info);
  for (size_t r = 0; r < all.size(); ++r) {
    if (std::memcmp(&all[r], &mine, sizeof(Signature)) == 0) continue;
    EMBER_FAIL("collective mismatch on ", info.group, ": rank ", rank, " called ", info.describe(), " but rank ", r,
               " called ", describe_signature(all[r], info.group),
               " (ranks must issue the same collectives, in the same order, with the same shapes)");
  }
}

bool same_payload(const Signature& a, const Signature& b) {
  return a.dtype == b.dtype && a.ndim == b.ndim && a.numel == b.numel &&
         std::memcmp(a.shape, b.shape, sizeof(a.shape)) == 0;
}

void check_sent_payload(const CollectiveInfo& recv, const Signature& sent, int rank) {
  EMBER_CHECK(same_payload(sent, signature_of(recv)), "send/recv mismatch on ", recv.group, ": rank ", rank, " called ",
              recv.describe(), " but rank ", recv.peer, " sent ", describe_signature(sent, recv.group),
              " (a recv must match its send's dtype and shape; sends and recvs pair up in order per peer and tag)");
}

}  // namespace ember::comm
