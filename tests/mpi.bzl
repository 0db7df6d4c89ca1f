"""mpi_test: runs a test binary under mpirun with NP ranks through tests/mpi_run.sh; env_test starts
its ranks without a launcher (tests/env_run.sh: RANK/WORLD_SIZE, rank 0 serving the store)."""

load("//tools/build:cuda.bzl", "EMULATOR_ONLY")

def mpi_test(name, binary, np, mpi_args = [], env = {}, size = "medium", tags = [], **kwargs):
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tests:mpi_run.sh"],
        args = [str(np), "$(location %s)" % binary] + mpi_args,
        data = [binary, "//tests:lsan_mpi.supp"],
        env = env,
        tags = tags + ["mpi"],
        **kwargs
    )

def env_test(name, binary, np, env = {}, size = "medium", tags = [], **kwargs):
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tests:env_run.sh"],
        args = [str(np), "$(location %s)" % binary],
        data = [binary],
        env = env,
        tags = tags,
        **kwargs
    )

def mpi_tests(name, srcs, deps, nps = [2, 4], nccl = False, nccl_nps = None, gloo = False):
    """A test binary `<name>_test_bin` and one mpi_test `<name>_np<N>_test` per rank count.

    nccl = True adds the same source built with EMBER_TEST_DEVICE=cuda (tests/test_device.h: each
    rank on cuda:LOCAL_RANK of NP emulated devices), linked with the NCCL process group and run
    NCCL-only (EMBER_BACKEND=nccl, so a host tensor reaching a collective fails): `<name>_nccl_test_bin`
    and `<name>_nccl_np<N>_test` (for nccl_nps, when given, instead of nps: emulated ranks cost more).
    Emulator-only: they need no GPU and are not tagged gpu.

    gloo = True adds the same source linked with the Gloo process group instead of MPI,
    `<name>_gloo_test_bin`, its ranks started without mpirun (env_test, EMBER_BACKEND=gloo):
    `<name>_gloo_np<N>_test` for each of nps.
    """
    native.cc_binary(
        name = name + "_test_bin",
        testonly = True,
        srcs = srcs,
        deps = deps,
    )
    for np in nps:
        mpi_test(name = "%s_np%d_test" % (name, np), binary = ":%s_test_bin" % name, np = np)
    if gloo:
        native.cc_binary(
            name = name + "_gloo_test_bin",
            testonly = True,
            srcs = srcs,
            deps = [d for d in deps if d != "//comm/mpi"] + ["//comm/gloo"],
        )
        for np in nps:
            env_test(
                name = "%s_gloo_np%d_test" % (name, np),
                binary = ":%s_gloo_test_bin" % name,
                np = np,
                env = {"EMBER_BACKEND": "gloo"},
            )
    if not nccl:
        return
    native.cc_binary(
        name = name + "_nccl_test_bin",
        testonly = True,
        srcs = srcs,
        deps = deps + ["//comm/nccl", "//cuda", "//tests:test_device"],
        local_defines = ["EMBER_TEST_DEVICE=cuda"],
        target_compatible_with = EMULATOR_ONLY,
    )
    for np in (nccl_nps or nps):
        mpi_test(
            name = "%s_nccl_np%d_test" % (name, np),
            binary = ":%s_nccl_test_bin" % name,
            np = np,
            env = {"EMBER_BACKEND": "nccl", "EMBER_EMULATED_GPUS": str(np)},
            target_compatible_with = EMULATOR_ONLY,
        )
