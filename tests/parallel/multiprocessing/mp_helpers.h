// Shared by the multiprocessing tests: /dev/shm contents and descriptor counts, to show that
// nothing leaks.
#pragma once

#include <dirent.h>

#include <set>
#include <string>

namespace ember::testing {

inline std::set<std::string> dir_entries(const char* path) {
  std::set<std::string> names;
  if (DIR* d = opendir(path)) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') names.insert(e->d_name);
    }
    closedir(d);
  }
  return names;
}

inline std::set<std::string> dev_shm() { return dir_entries("/dev/shm"); }
inline size_t open_fds() { return dir_entries("/proc/self/fd").size(); }

}  // namespace ember::testing
