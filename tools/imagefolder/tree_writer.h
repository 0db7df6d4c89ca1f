// Writing an image tree so that it appears whole or not at all: the files go under
// OUT.partial-PID, which is renamed to OUT once complete. A crash leaves only the .partial folder
// (removed by the next run for the same OUT), and no file needs its own fsync.
//
//   TreeWriter tree("/tmp/fmnist");          // raises when /tmp/fmnist exists, unless replace
//   tree.write("train/0_t_shirt_top/00000.jpg", bytes);
//   tree.commit();                           // /tmp/fmnist now holds the whole tree
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ember::imagefolder {

class TreeWriter {
 public:
  explicit TreeWriter(std::string out, bool replace = false);
  ~TreeWriter();  // removes the partial tree when commit() was not reached
  TreeWriter(const TreeWriter&) = delete;
  TreeWriter& operator=(const TreeWriter&) = delete;

  // `relative` under the tree; folders are made as needed.
  void write(const std::string& relative, const std::vector<uint8_t>& bytes);
  void commit();
  int64_t files() const { return files_; }
  int64_t bytes() const { return bytes_; }

 private:
  std::string out_;
  std::filesystem::path partial_;
  bool committed_ = false;
  int64_t files_ = 0, bytes_ = 0;
};

}  // namespace ember::imagefolder
