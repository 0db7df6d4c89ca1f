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
