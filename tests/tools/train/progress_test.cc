// The train tool's progress display (tools/train/progress.h): with stdout a file or pipe, one
// plain line every --log-every steps and at the end of the epoch; on a terminal (a pseudo-terminal
// here), one line redrawn with \r, ended by a newline at the end of the epoch; --progress bar and
// lines force either; nothing when disabled (ranks other than 0).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <pty.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>

#include "tools/train/progress.h"

using namespace ember::train;

namespace {

// Runs `body` with stdout (fd 1) sent to `fd`, then restores it.
template <typename F>
void with_stdout(int fd, F&& body) {
  std::fflush(stdout);
  int saved = ::dup(1);
  REQUIRE(saved >= 0);
  REQUIRE(::dup2(fd, 1) == 1);
  body();
  std::fflush(stdout);
  ::dup2(saved, 1);
  ::close(saved);
}

std::string read_fd(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// One epoch of five steps with losses 1.0, 0.9, ...; every other step logged.
void run_epoch(Progress& progress) {
  progress.start_epoch(2, 3, 5);
  for (int step = 1; step <= 5; ++step) progress.step(step, 1.1 - 0.1 * step, 32);
  progress.end_epoch();
}

// The output of run_epoch with stdout a regular file.
std::string run_into_file(const std::string& mode, bool* interactive) {
  std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/progress.txt";
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR, 0644);
  REQUIRE(fd >= 0);
  with_stdout(fd, [&] {
    Progress progress(true, 2, mode);
    *interactive = progress.interactive();
    run_epoch(progress);
  });
  ::lseek(fd, 0, SEEK_SET);
  std::string out = read_fd(fd);
  ::close(fd);
  return out;
}

// The output of run_epoch with stdout a pseudo-terminal.
std::string run_on_terminal(const std::string& mode, bool* interactive) {
  int leader, follower;
  REQUIRE(::openpty(&leader, &follower, nullptr, nullptr, nullptr) == 0);
  with_stdout(follower, [&] {
    Progress progress(true, 2, mode);
    *interactive = progress.interactive();
    run_epoch(progress);
  });
  ::close(follower);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(leader, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(leader);
  return out;
}

void check_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a terminal sends "\r\n"
    lines.push_back(line);
  }
  REQUIRE(lines.size() == 3);
  const char* expected[] = {"epoch 2/3 step 2/5 loss 0.9000 (avg 0.9500) ",
                            "epoch 2/3 step 4/5 loss 0.7000 (avg 0.8500) ",
                            "epoch 2/3 step 5/5 loss 0.6000 (avg 0.8000) "};
  for (size_t i = 0; i < lines.size(); ++i) {
    INFO(lines[i]);
    CHECK_THAT(lines[i], Catch::StartsWith(expected[i]));
    double rate;
    char eta[16];
    REQUIRE(std::sscanf(lines[i].c_str() + std::strlen(expected[i]), "%lf img/s ETA %15s", &rate, eta) == 2);
    CHECK(rate > 0);
  }
}

void check_bar(const std::string& out) {
  size_t redraws = 0;
  for (char c : out) redraws += c == '\r';
  CHECK(redraws >= 5);
  CHECK_THAT(out, Catch::Contains("\repoch 2/3 [#########...............] 2/5 loss 0.9000"));
  CHECK_THAT(out, Catch::Contains("\repoch 2/3 [########################] 5/5 loss 0.6000 (avg 0.8000)"));
  CHECK_THAT(out, Catch::EndsWith("\n"));
}

}  // namespace

TEST_CASE("Without a terminal: one line per --log-every steps and at the epoch's end", "[train][progress]") {
  bool interactive = true;
  std::string out = run_into_file("auto", &interactive);
  CHECK_FALSE(interactive);
  check_lines(out);
  CHECK(out.find('\r') == std::string::npos);
}

TEST_CASE("On a terminal: a bar redrawn in place every step", "[train][progress]") {
  bool interactive = false;
  std::string out = run_on_terminal("auto", &interactive);
  CHECK(interactive);
  check_bar(out);
}

TEST_CASE("--progress bar and lines override what stdout is", "[train][progress]") {
  bool interactive = false;
  check_bar(run_into_file("bar", &interactive));
  CHECK(interactive);
  check_lines(run_on_terminal("lines", &interactive));
  CHECK_FALSE(interactive);
}

TEST_CASE("A disabled display prints nothing", "[train][progress]") {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  with_stdout(pipe_fds[1], [&] {
    Progress progress(false, 1);
    run_epoch(progress);
  });
  ::close(pipe_fds[1]);
  CHECK(read_fd(pipe_fds[0]).empty());
  ::close(pipe_fds[0]);
}

TEST_CASE("A loss scale, once set, follows the loss in every line", "[train][progress]") {
  std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/scale.txt";
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR, 0644);
  REQUIRE(fd >= 0);
  with_stdout(fd, [&] {
    Progress progress(true, 1, "lines");
    progress.start_epoch(1, 1, 3);
    progress.step(1, 2.0, 8);
    progress.set_loss_scale(65536);
    progress.step(2, 1.5, 8);
    progress.set_loss_scale(0.5);  // many steps skipped for overflows
    progress.step(3, 1.0, 8);
  });
  ::lseek(fd, 0, SEEK_SET);
  std::istringstream in(read_fd(fd));
  ::close(fd);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 3);
  CHECK_THAT(lines[0], Catch::StartsWith("epoch 1/1 step 1/3 loss 2.0000 (avg 2.0000) ") && !Catch::Contains("scale"));
  CHECK_THAT(lines[1], Catch::StartsWith("epoch 1/1 step 2/3 loss 1.5000 (avg 1.7500) scale 65536 "));
  CHECK_THAT(lines[2], Catch::StartsWith("epoch 1/1 step 3/3 loss 1.0000 (avg 1.5000) scale 0.5 "));
}
