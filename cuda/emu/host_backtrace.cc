// Capturing with glibc's backtrace(); naming with dladdr, then addr2line for what the dynamic
// symbol table does not name (functions of a statically linked executable).
#include "cuda/emu/host_backtrace.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>

#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace ember::emu {

namespace {

std::string demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

// addr2line's function name for `offset` in `module`, or "".
std::string name_by_addr2line(const char* module, uintptr_t offset) {
  const std::string name = addr2line(module, offset, "-f -C");
  return name == "??" ? "" : name;
}

// make_shared and the like between the caller and the callee: not where anything was decided.
bool in_standard_library(const std::string& name) {
  return name.substr(0, name.find_first_of("(<")).find("std::") != std::string::npos;
}

}  // namespace

std::string addr2line(const std::string& module, uintptr_t offset, const char* options) {
  char address[32];
  std::snprintf(address, sizeof(address), "0x%zx", static_cast<size_t>(offset));
  const std::string command = std::string("addr2line ") + options + " -e '" + module + "' " + address + " 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  char line[4096] = "";
  const bool got = std::fgets(line, sizeof(line), pipe) != nullptr;
  ::pclose(pipe);
  if (!got) return "";
  line[std::strcspn(line, "\n")] = '\0';
  return line;
}

HostBacktrace capture_backtrace(int skip) {
  HostBacktrace trace;
  void* frames[HostBacktrace::kMaxFrames + 8];
  const int got = ::backtrace(frames, HostBacktrace::kMaxFrames + 8);
  for (int i = skip + 1; i < got && trace.count < HostBacktrace::kMaxFrames; ++i)
    trace.frames[trace.count++] = frames[i];
  return trace;
}

std::string describe(const HostBacktrace& trace) {
  std::string out;
  int shown = 0;
  for (int i = 0; i < trace.count; ++i) {
    // The call instruction is before the return address (which may be the next function's start).
    const uintptr_t address = reinterpret_cast<uintptr_t>(trace.frames[i]) - 1;
    Dl_info info{};
    std::string name, module = "?";
    if (::dladdr(reinterpret_cast<void*>(address), &info) != 0) {
      if (info.dli_fname != nullptr) module = info.dli_fname;
      if (info.dli_sname != nullptr)
        name = demangle(info.dli_sname);
      else if (info.dli_fname != nullptr) {
        // Offsets within a position-independent module; absolute addresses in one that is not.
        // The main program's name is its argv[0], which may be relative to a directory left since.
        const char* file = ::access(info.dli_fname, R_OK) == 0 ? info.dli_fname : "/proc/self/exe";
        name = name_by_addr2line(file, address - reinterpret_cast<uintptr_t>(info.dli_fbase));
        if (name.empty()) name = name_by_addr2line(file, address);
      }
    }
    if (name == "__libc_start_main" || name == "__libc_start_call_main" || name == "_start") break;
    if (in_standard_library(name) || (out.empty() && name.rfind("ember::emu::", 0) == 0)) continue;
    const size_t slash = module.rfind('/');
    out += "    #" + std::to_string(shown++) + " " + (name.empty() ? "?" : name) + " in " +
           (slash == std::string::npos ? module : module.substr(slash + 1)) + "\n";
  }
  return out;
}

}  // namespace ember::emu
