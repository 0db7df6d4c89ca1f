// popen, not fork + exec by hand: the child's stdout and stderr arrive as one stream, which is
// what a person reading the bench's log wants to see in order.
#include "tools/bench/gpu_yardstick.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace ember::bench {

namespace {

double value_of(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return std::nan("");
  return std::strtod(line.c_str() + at + key.size() + 2, nullptr);
}

std::string word_after(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() + 2;
  return line.substr(start, line.find(' ', start) - start);
}

bool starts_with(const std::string& line, const std::string& prefix) { return line.rfind(prefix, 0) == 0; }

}  // namespace

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char ch : text) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

TorchResults run_pytorch(const std::string& python, const std::string& script, const std::string& arguments) {
  TorchResults r;
  if (!std::filesystem::exists(script)) {
    r.unavailable = "script " + script + " not found (--torch-script)";
    return r;
  }
  const std::string command = python + " " + shell_quote(script) + " " + arguments + " 2>&1";
  std::printf("\nPyTorch yardstick: %s\n", command.c_str());
  std::fflush(stdout);
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    r.unavailable = "could not start a shell for " + python;
    return r;
  }
  std::string last, summary;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    std::string line(buffer);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    std::printf("  | %s\n", line.c_str());
    std::fflush(stdout);
    if (!line.empty()) last = line;
    if (starts_with(line, "conv ")) {
      const std::string spec = line.substr(5, line.find(' ', 5) - 5);
      r.convs[spec] = {value_of(line, "fwd_ms"), value_of(line, "bwd_ms")};
    } else if (starts_with(line, "bench pytorch_gpu:")) {
      summary = line;
    }
  }
  const int status = pclose(pipe);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (!summary.empty()) {
    r.version = word_after(summary, "torch");
    r.resnet50_ips = value_of(summary, "resnet50_ips");
    r.resnet18_ips = value_of(summary, "resnet18_ips");
    r.resnet50_fp16_ips = value_of(summary, "resnet50_fp16_ips");
    r.resnet50_bf16_ips = value_of(summary, "resnet50_bf16_ips");
  } else if (const std::string prefix = "pytorch_gpu: unavailable: "; starts_with(last, prefix)) {
    r.unavailable = last.substr(prefix.size());
  } else if (code == 127) {
    r.unavailable = "'" + python + "' not found";
  } else {
    r.unavailable = "'" + python + "' exited with status " + std::to_string(code) + (last.empty() ? "" : ": " + last);
  }
  return r;
}

}  // namespace ember::bench
