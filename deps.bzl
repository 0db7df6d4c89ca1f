"""Ember's external repositories, for a workspace that depends on Ember:

    local_repository(name = "ember", path = "/path/to/ember")   # or http_archive(...)
    load("@ember//:deps.bzl", "ember_dependencies")
    ember_dependencies()

Every one is a Debian package on this machine (tools/setup installs them) or the CUDA toolkit
(found by cuda_configure, needed only for --@ember//tools/build:cuda=true)."""

load("@ember//third_party/cuda:cuda_configure.bzl", "cuda_configure")

def ember_dependencies():
    native.new_local_repository(name = "eigen", path = "/usr/include/eigen3", build_file = "@ember//third_party:eigen.BUILD")
    native.new_local_repository(name = "catch2", path = "/usr/include/catch2", build_file = "@ember//third_party:catch2.BUILD")
    native.new_local_repository(name = "openmpi", path = "/usr/lib/x86_64-linux-gnu/openmpi", build_file = "@ember//third_party:openmpi.BUILD")
    native.new_local_repository(name = "system_libs", path = "/usr", build_file = "@ember//third_party:system_libs.BUILD")
    cuda_configure(name = "local_cuda")
