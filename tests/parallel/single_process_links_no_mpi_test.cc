// //parallel is the single-process part (DataParallel, model placement, pipelines): linked alone it
// brings neither MPI nor NCCL. This binary links only //parallel (and Catch2's main): a pipeline
// of two CPU stages trains like the plain model, and no MPI or NCCL symbol or library is in the
// process. The build-graph side of the same claim: `bazel query 'somepath(//parallel,
// @openmpi//:mpi)'` is empty. (Bazel links a cc_test's libraries as shared objects, so a symbol of
// any linked library, the emulated NCCL's included, is visible to dlsym.)
#include <dlfcn.h>
#include <link.h>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "autograd/functional.h"
#include "core/ember_core.h"
#include "nn/nn.h"
#include "parallel/pipeline.h"
#include "parallel/replica_batch_norm.h"

using namespace ember;

namespace {

// The file names of the shared objects loaded into this process.
std::vector<std::string> loaded_libraries() {
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name != nullptr && *info->dlpi_name != '\0')
          static_cast<std::vector<std::string>*>(data)->push_back(info->dlpi_name);
        return 0;
      },
      &names);
  return names;
}

nn::Sequential small_net() {
  return nn::Sequential(nn::Linear(4, 8), nn::BatchNorm1d(8), nn::ReLU(), nn::Linear(8, 3));
}

}  // namespace

TEST_CASE("//parallel alone: a CPU pipeline trains, and no MPI or NCCL is linked", "[parallel][link]") {
  manual_seed(3);
  nn::Sequential plain = small_net();
  nn::Sequential staged = small_net();
  staged->load_state_dict(plain->state_dict());
  // SyncBatchNorm across replicas needs no process group (outside DataParallel: the batch's own).
  REQUIRE(parallel::convert_sync_batchnorm(*plain.ptr()) == 1);
  const Tensor x = randn({6, 4});
  const Tensor y = randn({6, 3});
  parallel::PipelineOptions options;
  options.balance = {2, 2};
  auto pipe = std::make_shared<parallel::Pipeline>(staged, std::vector<Device>{Device(kCPU), Device(kCPU)},
                                                   /*chunks=*/1, parallel::Schedule::k1F1B, options);
  const Tensor expected = mse_loss(plain->forward(x), y);
  const parallel::PipelineStep step =
      pipe->train_step(x, y, [](const Tensor& out, const Tensor& target) { return mse_loss(out, target); });
  REQUIRE(step.loss.item<float>() == Approx(expected.item<float>()).epsilon(1e-5));

  CHECK(dlsym(RTLD_DEFAULT, "MPI_Init") == nullptr);
  CHECK(dlsym(RTLD_DEFAULT, "ncclCommInitRank") == nullptr);
  for (const std::string& name : loaded_libraries()) {
    INFO("loaded: " << name);
    // Open MPI's libmpi.so, or //comm/mpi's own (Bazel names it libcomm_Smpi_Slibmpi.so).
    CHECK(name.find("libmpi") == std::string::npos);
    CHECK(name.find("libopen-") == std::string::npos);  // Open MPI's libopen-pal / libopen-rte
    CHECK(name.find("nccl") == std::string::npos);
  }
}
