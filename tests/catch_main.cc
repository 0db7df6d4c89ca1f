// Catch2's main(), built once for all test binaries: the sharded session of catch_session.cc.
#include "tests/catch_session.h"

int main(int argc, char** argv) { return ember::test::run_catch_session(argc, argv); }
