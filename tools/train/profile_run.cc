#include "tools/train/profile_run.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/ember_core.h"
#include "core/io/file_io.h"

namespace ember::train {

namespace {

// Every rank's text, on rank 0 (empty elsewhere): lengths, then the texts padded to the longest.
std::vector<std::string> gather_texts(comm::ProcessGroup& world, Device device, const std::string& mine) {
  const int n = world.size();
  Tensor length = tensor(std::vector<int64_t>{static_cast<int64_t>(mine.size())}).to(device);
  std::vector<Tensor> lengths;
  for (int r = 0; r < n; ++r) lengths.push_back(empty({1}, TensorOptions(kInt64).device(device)));
  world.all_gather(lengths, length)->wait();
  std::vector<int64_t> sizes;
  for (const Tensor& l : lengths) sizes.push_back(l.to(kCPU).item<int64_t>());
  const int64_t longest = *std::max_element(sizes.begin(), sizes.end());
  Tensor bytes = zeros({longest}, kUInt8);
  std::memcpy(bytes.data_ptr(), mine.data(), mine.size());
  std::vector<Tensor> all;
  for (int r = 0; r < n; ++r) all.push_back(empty({longest}, TensorOptions(kUInt8).device(device)));
  world.all_gather(all, bytes.to(device))->wait();
  std::vector<std::string> texts;
  if (world.rank() != 0) return texts;
  for (int r = 0; r < n; ++r) {
    const Tensor host = all[static_cast<size_t>(r)].to(kCPU);
    texts.emplace_back(static_cast<const char*>(host.data_ptr()), static_cast<size_t>(sizes[static_cast<size_t>(r)]));
  }
  return texts;
}

void write_text(const std::string& path, const std::string& text) {
  write_file_atomic(path, std::vector<uint8_t>(text.begin(), text.end()));
}

}  // namespace

ProfileRun::ProfileRun(const TrainConfig& config, std::shared_ptr<comm::ProcessGroup> world, Device device, int rank)
    : config_(config), world_(std::move(world)), device_(device), rank_(rank) {}

void ProfileRun::before_step(int64_t run_step) {
  if (config_.profile_dir.empty() || run_step != config_.profile_first_step) return;
  session_ = std::make_unique<profiler::Session>(profiler::SessionOptions{.rank = rank_});
  session_->start();
}

void ProfileRun::after_step(int64_t run_step) {
  if (session_ && run_step == config_.profile_last_step) write();
}

void ProfileRun::finish() {
  if (session_) write();
}

void ProfileRun::write() {
  session_->stop();
  const std::string text = session_->chrome_trace();
  const size_t events = session_->events().size();
  session_.reset();
  std::filesystem::create_directories(config_.profile_dir);
  const std::string dir = config_.profile_dir + "/";
  write_text(dir + "trace.rank" + std::to_string(rank_) + ".json", text);
  const std::vector<std::string> texts =
      world_ && world_->size() > 1 ? gather_texts(*world_, device_, text) : std::vector<std::string>{text};
  if (rank_ != 0) return;
  write_text(dir + "trace.json", profiler::merge_traces(texts));
  std::printf(
      "profile: steps %lld-%lld in %strace.json (%zu events on rank 0; one file per rank beside it), for "
      "ui.perfetto.dev or chrome://tracing\n",
      static_cast<long long>(config_.profile_first_step), static_cast<long long>(config_.profile_last_step),
      dir.c_str(), events);
}

}  // namespace ember::train
