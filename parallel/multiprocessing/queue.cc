// A Queue is one SOCK_SEQPACKET socket pair that every process holding it writes to at one end
// and reads from at the other: the kernel keeps each message whole and hands it to one reader.
#include "parallel/multiprocessing/queue.h"

#include <unistd.h>

#include "core/error.h"
#include "parallel/multiprocessing/channel.h"
#include "parallel/multiprocessing/queue_ends.h"

namespace ember::multiprocessing {

Queue::Ends::Ends() {
  int fds[2];
  detail::socket_pair(fds, "Queue");
  put_fd = fds[0];
  get_fd = fds[1];
}

Queue::Ends::~Ends() {
  if (put_fd >= 0) close(put_fd);
  if (get_fd >= 0) close(get_fd);
}

Queue::Queue() : ends_(std::make_shared<Ends>()) {}

Queue::~Queue() = default;

void Queue::put(const Tensor& tensor) {
  detail::Writer w;
  w.tensor(tensor);
  detail::send_message(ends_->put_fd, w.finish(), "Queue.put");
}

Tensor Queue::get(std::optional<std::chrono::milliseconds> timeout) {
  const int wait = timeout ? static_cast<int>(timeout->count()) : -1;
  auto message = detail::receive_message(ends_->get_fd, wait, "Queue.get");
  EMBER_CHECK(message.has_value(), "Queue.get: no tensor arrived within ", wait, " ms");
  detail::Reader r(*message, "Queue.get");
  return r.tensor();
}

std::optional<Tensor> Queue::try_get() {
  auto message = detail::receive_message(ends_->get_fd, 0, "Queue.get");
  if (!message) return std::nullopt;
  detail::Reader r(*message, "Queue.get");
  return r.tensor();
}

}  // namespace ember::multiprocessing
