// Catch2's main(), built once for all test binaries.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
