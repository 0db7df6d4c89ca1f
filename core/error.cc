// Out-of-line throw keeps EMBER_CHECK's fast path small.
#include "core/error.h"

namespace ember::detail {

void throw_error(const std::string& message) { throw Error(message); }

}  // namespace ember::detail
