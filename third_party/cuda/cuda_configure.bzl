"""Repository rule @local_cuda: describes the CUDA toolkit if one is installed.

It looks for nvcc under $CUDA_PATH, then /usr/local/cuda. When the toolkit is
absent the repository still exists, with CUDA_AVAILABLE = False and empty
libraries, so the default build never needs CUDA.
"""

def _find_cuda(ctx):
    candidates = []
    env_path = ctx.os.environ.get("CUDA_PATH", "")
    if env_path:
        candidates.append(env_path)
    candidates.append("/usr/local/cuda")
    for root in candidates:
        if ctx.path(root + "/bin/nvcc").exists:
            return root
    return None

def _cuda_configure_impl(ctx):
    root = _find_cuda(ctx)
    if root:
        ctx.symlink(root + "/include", "include")
        ctx.file("defs.bzl", "CUDA_AVAILABLE = True\nCUDA_ROOT = \"%s\"\nNVCC = \"%s/bin/nvcc\"\n" % (root, root))
        body = """
cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh"]),
    includes = ["include"],
)
cc_library(name = "cudart", deps = [":cuda_headers"], linkopts = ["-L{root}/lib64", "-Wl,-rpath,{root}/lib64", "-lcudart"])
cc_library(name = "cublas", deps = [":cuda_headers"], linkopts = ["-L{root}/lib64", "-lcublas", "-lcublasLt"])
cc_library(name = "cudnn", deps = [":cuda_headers"], linkopts = ["-L{root}/lib64", "-lcudnn"])
cc_library(name = "nccl", deps = [":cuda_headers"], linkopts = ["-L{root}/lib64", "-lnccl"])
""".format(root = root)
    else:
        ctx.file("defs.bzl", "CUDA_AVAILABLE = False\nCUDA_ROOT = \"\"\nNVCC = \"\"\n")
        body = """
cc_library(name = "cuda_headers")
cc_library(name = "cudart")
cc_library(name = "cublas")
cc_library(name = "cudnn")
cc_library(name = "nccl")
"""
    ctx.file("BUILD", "package(default_visibility = [\"//visibility:public\"])\nexports_files([\"defs.bzl\"])\n" + body)

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
