// TreeWriter (tree_writer.h).
#include "tools/imagefolder/tree_writer.h"

#include <fstream>

#include <unistd.h>

#include "core/error.h"

namespace fs = std::filesystem;

namespace ember::imagefolder {

TreeWriter::TreeWriter(std::string out, bool replace) : out_(std::move(out)) {
  while (out_.size() > 1 && out_.back() == '/') out_.pop_back();
  EMBER_CHECK(!out_.empty(), "TreeWriter: empty output path");
  EMBER_CHECK(replace || !fs::exists(out_), "'", out_, "' already exists");
  // Leftovers of interrupted runs writing the same tree.
  const fs::path parent = fs::absolute(out_).parent_path();
  const std::string prefix = fs::path(out_).filename().string() + ".partial-";
  fs::create_directories(parent);
  for (const auto& entry : fs::directory_iterator(parent))
    if (entry.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(entry.path());
  partial_ = parent / (prefix + std::to_string(getpid()));
  fs::create_directories(partial_);
}

TreeWriter::~TreeWriter() {
  std::error_code ignored;
  if (!committed_) fs::remove_all(partial_, ignored);
}

void TreeWriter::write(const std::string& relative, const std::vector<uint8_t>& bytes) {
  const fs::path path = partial_ / relative;
  fs::create_directories(path.parent_path());
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  file.close();
  EMBER_CHECK(file.good(), "cannot write '", path.string(), "'");
  ++files_;
  bytes_ += static_cast<int64_t>(bytes.size());
}

void TreeWriter::commit() {
  if (fs::exists(out_)) fs::remove_all(out_);  // only with replace: the constructor refused it otherwise
  fs::rename(partial_, out_);
  committed_ = true;
}

}  // namespace ember::imagefolder
