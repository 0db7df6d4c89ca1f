// Ember's version: EMBER_VERSION at compile time, ember::version() for the library a program runs
// against (they differ when an installed libember.so is replaced under a built program).
//
// Until 1.0 the minor number is the ABI: libember.so.0.MINOR is the soname, and a program built
// against one minor needs that minor (the CMake package accepts only a matching 0.MINOR).
#pragma once

#define EMBER_VERSION_MAJOR 0
#define EMBER_VERSION_MINOR 1
#define EMBER_VERSION_PATCH 0
#define EMBER_VERSION "0.1.0"

namespace ember {

// "MAJOR.MINOR.PATCH" of the linked library.
const char* version();

}  // namespace ember
