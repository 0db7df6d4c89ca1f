"""cuda_library: CUDA sources (.cu) built two ways from the same files.

  --config=cuda   nvcc compiles each .cu (sm_80 and sm_90 SASS plus compute_90 PTX) into an object
                  that a cc_library links with the CUDA runtime;
  default         the host compiler compiles each .cu as C++ against cuda/emu, Ember's CPU
                  emulation of the CUDA execution model: no CUDA dependency at all.

    cuda_library(name = "kernels", srcs = ["add.cu"], hdrs = ["add.cuh"], deps = ["//core"])
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")
load("@local_cuda//:defs.bzl", "NVCC")

_GENCODE = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

def _nvcc_objects_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    compilation = [dep[CcInfo].compilation_context for dep in ctx.attr.deps]
    headers = depset(ctx.files.hdrs, transitive = [c.headers for c in compilation])
    include_flags = ["-I."]
    for c in compilation:
        for path in c.includes.to_list() + c.quote_includes.to_list() + c.system_includes.to_list():
            include_flags.append("-I" + path)
        for define in c.defines.to_list():
            include_flags.append("-D" + define)

    # The C++ standard and the like that .bazelrc gives the host compiler (--cxxopt) reach nvcc too.
    cxxopts = [opt for opt in ctx.fragments.cpp.cxxopts if opt.startswith("-std=")]
    optimise = ["-O3"] if ctx.var["COMPILATION_MODE"] == "opt" else ["-O1", "-lineinfo"]
    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_nvcc/%s/%s.o" % (ctx.label.name, src.basename[:-len(src.extension) - 1]))
        args = ctx.actions.args()
        args.add("-ccbin", cc_toolchain.compiler_executable)
        args.add_all(["-Xcompiler", "-fPIC", "--expt-relaxed-constexpr"])
        args.add_all(_GENCODE)
        args.add_all(cxxopts)
        args.add_all(optimise)
        args.add_all(include_flags)
        args.add_all(ctx.attr.copts)
        args.add_all(["-c", src.path, "-o", obj.path])
        ctx.actions.run(
            executable = NVCC,
            arguments = [args],
            inputs = depset([src], transitive = [headers, cc_toolchain.all_files]),
            outputs = [obj],
            mnemonic = "Nvcc",
            progress_message = "nvcc %s" % src.short_path,
            # nvcc runs the host compiler, which needs `as` and friends from PATH.
            use_default_shell_env = True,
        )
        objects.append(obj)
    return [DefaultInfo(files = depset(objects))]

_nvcc_objects = rule(
    implementation = _nvcc_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
)

def _cu_as_cc_impl(ctx):
    outputs = []
    for src in ctx.files.srcs:
        out = ctx.actions.declare_file("_emu/%s/%s.cc" % (ctx.label.name, src.basename[:-len(src.extension) - 1]))
        ctx.actions.run_shell(
            inputs = [src],
            outputs = [out],
            command = "{ printf '#line 1 \"%s\"\\n'; cat '%s'; } > '%s'" % (src.path, src.path, out.path),
            mnemonic = "CuAsCc",
        )
        outputs.append(out)
    return [DefaultInfo(files = depset(outputs))]

# The host compiler takes .cc, not .cu: each source is copied under a .cc name, with a #line that
# keeps its own name in diagnostics and __FILE__ (the emulator's barrier sites name it).
_cu_as_cc = rule(
    implementation = _cu_as_cc_impl,
    attrs = {"srcs": attr.label_list(allow_files = [".cu"])},
)

# Emulated kernels and the emulator run optimised even in the default (fastbuild, -O0) build and
# under ASan (-O1): a kernel's threads are plain calls and fiber switches, and at -O0 the suite's
# emulated tests spent most of their time in unoptimised bookkeeping (a large max(dim) case: 25 s).
EMULATED_COPTS = ["-O2"]

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], nvcc_copts = [], **kwargs):
    """A cc_library of CUDA sources: nvcc objects under --config=cuda, emulated C++ otherwise.
    `nvcc_copts` reach nvcc only (e.g. --fmad=false)."""
    _nvcc_objects(
        name = name + "_nvcc",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps + ["//cuda:lang"],
        copts = copts + nvcc_copts,
        tags = ["manual"],  # built only through the cc_library below, under --config=cuda
    )
    _cu_as_cc(name = name + "_emu_srcs", srcs = srcs, tags = ["manual"])
    native.cc_library(
        name = name,
        srcs = select({
            "//tools/build:cuda_enabled": [":" + name + "_nvcc"],
            "//conditions:default": [":" + name + "_emu_srcs"],
        }),
        hdrs = hdrs,
        copts = copts + EMULATED_COPTS,
        deps = deps + ["//cuda:lang"],
        **kwargs
    )

# Targets that exist in one of the two builds only: the emulator's own tests (default build) and
# tests that need a real GPU (--config=cuda). `bazel build //...` skips the other kind.
EMULATOR_ONLY = select({
    "//tools/build:cuda_enabled": ["//tools/build:never"],
    "//conditions:default": [],
})
REAL_GPU_ONLY = select({
    "//tools/build:cuda_enabled": [],
    "//conditions:default": ["//tools/build:never"],
})

def cuda_test(name, srcs, deps = [], size = "small", env = {}, **kwargs):
    """One test source, two targets: `name` on emulated devices (default build, CI) and
    `name_gpu` on real ones (--config=cuda, tagged gpu; CI excludes it)."""
    native.cc_test(
        name = name,
        srcs = srcs,
        deps = deps,
        size = size,
        env = env,
        target_compatible_with = EMULATOR_ONLY,
        **kwargs
    )
    native.cc_test(
        name = name + "_gpu",
        srcs = srcs,
        deps = deps,
        size = size,
        env = env,
        tags = ["gpu"],
        target_compatible_with = REAL_GPU_ONLY,
        **kwargs
    )
