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

# The -I and -D flags of `deps`, and their headers.
def _include_flags(deps):
    compilation = [dep[CcInfo].compilation_context for dep in deps]
    flags = ["-I."]
    for c in compilation:
        for path in c.includes.to_list() + c.quote_includes.to_list() + c.system_includes.to_list():
            flags.append("-I" + path)
        for define in c.defines.to_list():
            flags.append("-D" + define)
    return flags, depset(transitive = [c.headers for c in compilation])

def _nvcc_objects_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    include_flags, dep_headers = _include_flags(ctx.attr.deps)
    headers = depset(ctx.files.hdrs, transitive = [dep_headers])

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

# What the rules that compile sources themselves (nvcc, the race-checking copies) are given.
_OBJECT_RULE_ATTRS = {
    "hdrs": attr.label_list(allow_files = True),
    "deps": attr.label_list(providers = [CcInfo]),
    "copts": attr.string_list(),
    "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
}

_nvcc_objects = rule(
    implementation = _nvcc_objects_impl,
    attrs = dict(_OBJECT_RULE_ATTRS, srcs = attr.label_list(allow_files = [".cu"])),
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

# Under ASan, Ember's emulated kernels and the emulator keep their locals on the real stack. The
# asan config's tests run with detect_stack_use_after_return=1, which moves every frame holding an
# addressable local to a heap "fake stack" (42% of an emulated test's time went to ASan's
# FakeStack::GC, under the emulator's fibers): the emulated tests ran 1.6-4x slower with
# it (train_step_test 10.8 s against 4.4 s), the CPU tests no slower. What goes unreported is
# one of those kernels returning a pointer to its own local; every other ASan check stays, host
# code keeps this one, and the planted-bug kernels (cuda_library(keep_stack_use_after_return =
# True)) keep it, so emu_fidelity_test still proves that the emulator's fibers report it.
EMULATED_ASAN_COPTS = select({
    "//tools/build:asan_enabled": ["--param=asan-use-after-return=0"],
    "//conditions:default": [],
})

# The race-checking copy of each emulated source (below): ThreadSanitizer's calls at every access,
# none at function entry and exit, and line tables for the reports.
RACECHECK_COPTS = ["-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0", "-g1"]

# Compiles one race-checking copy: $1 compiler, $2 objcopy, $3 source, $4 instrumented object, $5
# the object linked, then the flags. Race detection watches shared memory only, so a source whose
# preprocessed text uses none (no token from cuda/emu/lang.h's scan mode) gets an empty object:
# its launches run the plain loop in checking mode too, and it costs no compile. Otherwise the
# copy's symbols are made local and its COMDAT groups plain sections: it links beside the plain
# object without a clash, and no inline function or template instance of the copy replaces the
# plain one's (namespace std's, of default visibility, stay weak: either serves).
_RACECHECK_COMMAND = """
set -eu
cc=$1 objcopy=$2 src=$3 raw=$4 obj=$5
shift 5
"$cc" "$@" -E -DEMBER_EMU_SHARED_MEMORY_SCAN "$src" -o "$raw.scan"
if grep -qw ember_emu_uses_shared_memory "$raw.scan"; then
  "$cc" "$@" -c "$src" -o "$raw"
else
  "$cc" -x c++ -fPIC -c /dev/null -o "$raw"
fi
rm -f "$raw.scan"
"$objcopy" --remove-section=.group --localize-hidden "$raw" "$obj"
"""

def _racecheck_objects_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    include_flags, dep_headers = _include_flags(ctx.attr.deps)
    headers = depset(ctx.files.hdrs, transitive = [dep_headers])
    cxxopts = [opt for opt in ctx.fragments.cpp.cxxopts if opt.startswith("-std=")]
    objects = []
    for src in ctx.files.srcs:
        base = "_racecheck/%s/%s" % (ctx.label.name, src.basename[:-len(src.extension) - 1])
        raw = ctx.actions.declare_file(base + ".instrumented.o")
        obj = ctx.actions.declare_file(base + ".o")
        args = ctx.actions.args()
        args.add_all([cc_toolchain.compiler_executable, cc_toolchain.objcopy_executable, src.path, raw.path, obj.path])
        args.add_all(ctx.fragments.cpp.copts)
        args.add_all(cxxopts)
        args.add_all(EMULATED_COPTS + RACECHECK_COPTS)
        # Hidden, so that objcopy makes them local; no STB_GNU_UNIQUE (a function's static in an
        # inline function of namespace std, of default visibility): weak, like the rest there.
        args.add_all(["-fPIC", "-fno-omit-frame-pointer", "-w", "-fvisibility=hidden", "-fvisibility-inlines-hidden",
                      "-fno-gnu-unique"])
        args.add("-DEMBER_EMU_RACECHECK_COPY")
        args.add_all(include_flags)
        args.add_all(ctx.attr.copts)
        ctx.actions.run_shell(
            arguments = [args],
            command = _RACECHECK_COMMAND,
            inputs = depset([src], transitive = [headers, cc_toolchain.all_files]),
            outputs = [raw, obj],
            mnemonic = "RacecheckCompile",
            progress_message = "racecheck copy of %s" % src.short_path,
            use_default_shell_env = True,
        )
        objects.append(obj)
    return [DefaultInfo(files = depset(objects))]

# Each emulated kernel source compiled a second time with GCC's ThreadSanitizer instrumentation
# but without its runtime, for the checking mode's race detection (cuda/emu/racecheck.h): its
# loads, stores and atomics call cuda/emu/tsan_entry.cc, and its line tables name the sites in
# reports. The copy's launches register their thread loops (cuda/emu/emu.h), which the scheduler
# runs instead of the plain ones in checking mode: the default mode pays nothing for it.
_racecheck_objects = rule(
    implementation = _racecheck_objects_impl,
    attrs = dict(_OBJECT_RULE_ATTRS, srcs = attr.label_list(allow_files = [".cc"])),
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], nvcc_copts = [], keep_stack_use_after_return = False, **kwargs):
    """A cc_library of CUDA sources: nvcc objects under --config=cuda, emulated C++ otherwise.
    `nvcc_copts` reach nvcc only (e.g. --fmad=false); `keep_stack_use_after_return` keeps ASan's
    fake stacks in the emulated objects (EMULATED_ASAN_COPTS)."""
    _nvcc_objects(
        name = name + "_nvcc",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps + ["//cuda:lang"],
        copts = copts + nvcc_copts,
        tags = ["manual"],  # built only through the cc_library below, under --config=cuda
    )
    _cu_as_cc(name = name + "_emu_srcs", srcs = srcs, tags = ["manual"])
    _racecheck_objects(
        name = name + "_racecheck",
        srcs = [":" + name + "_emu_srcs"],
        hdrs = hdrs,
        deps = deps + ["//cuda:lang"],
        copts = copts,
        tags = ["manual"],
    )
    # Always linked: nothing refers to the copies, which register themselves as they load. Empty
    # under --config=cuda (nvcc's objects have no copy).
    native.cc_library(
        name = name + "_racecheck_copy",
        srcs = select({
            "//tools/build:cuda_enabled": [],
            "//conditions:default": [":" + name + "_racecheck"],
        }),
        deps = deps + ["//cuda:lang"],
        alwayslink = True,
        testonly = kwargs.get("testonly", False),
        tags = ["manual"],
    )
    native.cc_library(
        name = name,
        srcs = select({
            "//tools/build:cuda_enabled": [":" + name + "_nvcc"],
            "//conditions:default": [":" + name + "_emu_srcs"],
        }),
        hdrs = hdrs,
        copts = copts + EMULATED_COPTS + ([] if keep_stack_use_after_return else EMULATED_ASAN_COPTS),
        deps = deps + ["//cuda:lang"] + select({
            # ThreadSanitizer's instrumentation cannot be combined with AddressSanitizer's.
            "//tools/build:asan_enabled": [],
            "//conditions:default": [":" + name + "_racecheck_copy"],
        }),
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
