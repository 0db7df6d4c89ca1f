"""mpi_test: runs a test binary under mpirun with NP ranks through tests/mpi_run.sh."""

def mpi_test(name, binary, np, mpi_args = [], env = {}, size = "medium", tags = []):
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tests:mpi_run.sh"],
        args = [str(np), "$(location %s)" % binary] + mpi_args,
        data = [binary, "//tests:lsan_mpi.supp"],
        env = env,
        tags = tags + ["mpi"],
    )

def mpi_tests(name, srcs, deps, nps = [2, 4]):
    """A test binary `<name>_test_bin` and one mpi_test `<name>_np<N>_test` per rank count."""
    native.cc_binary(
        name = name + "_test_bin",
        testonly = True,
        srcs = srcs,
        deps = deps,
    )
    for np in nps:
        mpi_test(name = "%s_np%d_test" % (name, np), binary = ":%s_test_bin" % name, np = np)
