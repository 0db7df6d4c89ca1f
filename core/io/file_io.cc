// POSIX implementation of the crash-safe file writer and the whole-file reader.
#include "core/io/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "core/error.h"

namespace ember {

namespace {

std::string errno_text() { return std::strerror(errno); }

std::string parent_directory(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void write_all(int fd, const uint8_t* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    EMBER_CHECK(n > 0, "write_file_atomic: writing '", path, "' failed: ", errno_text());
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::random_device entropy;
  std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(entropy());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  EMBER_CHECK(fd >= 0, "write_file_atomic: cannot create '", temp, "': ", errno_text());
  try {
    write_all(fd, bytes.data(), bytes.size(), temp);
    EMBER_CHECK(::fsync(fd) == 0, "write_file_atomic: fsync of '", temp, "' failed: ", errno_text());
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    std::string reason = errno_text();
    ::unlink(temp.c_str());
    EMBER_FAIL("write_file_atomic: cannot rename '", temp, "' to '", path, "': ", reason);
  }
  // The rename itself is only durable once the directory entry is on disk.
  int dir = ::open(parent_directory(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

std::vector<uint8_t> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EMBER_CHECK(fd >= 0, "read_file: cannot open '", path, "': ", errno_text());
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    EMBER_FAIL("read_file: '", path, "' is not a regular file");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      EMBER_FAIL("read_file: reading '", path, "' failed after ", done, " of ", bytes.size(),
                 " bytes: ", n == 0 ? "unexpected end of file" : errno_text());
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return bytes;
}

}  // namespace ember
