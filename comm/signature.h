// A collective's fixed-size signature, which ranks exchange under EMBER_DISTRIBUTED_DEBUG=1 to
// find the first collective they disagree on; the same bytes and messages for every backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/process_group.h"

namespace ember::comm {

struct Signature {
  int32_t kind, op, dtype, ndim;
  int64_t shape[8];
  int64_t numel;
  int32_t peer, tag;
  uint64_t sequence;
  int32_t non_blocking;
};

// Zero-filled first, so signatures compare with memcmp.
Signature signature_of(const CollectiveInfo& info);
std::string describe_signature(const Signature& s, const std::string& group);
// Raises "collective mismatch on GROUP: rank R called ... but rank S called ..." for the first
// rank whose signature differs from this one's (`all` indexed by group rank).
void check_same_collective(const CollectiveInfo& info, const std::vector<Signature>& all, int rank);
// Whether two signatures describe the same payload (dtype and shape).
bool same_payload(const Signature& a, const Signature& b);
// A receiver's check of its sender's signature: raises when dtype or shape differ.
void check_sent_payload(const CollectiveInfo& recv, const Signature& sent, int rank);

}  // namespace ember::comm
