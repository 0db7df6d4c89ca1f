// Rank 1 kills itself (SIGKILL) in the middle of a DDP backward while rank 0 trains on: rank 0 is
// then inside its own backward with bucket all-reduces posted and in flight, and must say so when
// it ends (ddp_rank_death_test.sh checks its stderr, whether mpirun's SIGTERM or the collective
// timeout ends it). With the argument `stall`, rank 1 stops there but stays alive: only the
// timeout can end rank 0. Built with EMBER_TEST_DEVICE=cuda, each rank trains on cuda:LOCAL_RANK.
// A second argument picks the wrapper: ddp (default); stage2, ShardedDataParallel stage 2 (rank 0
// is left in a gradient reduce-scatter); stage3, stage 3 with rank 1 dying before a unit's forward
// (rank 0 is left in that unit's all-gather).
#include <signal.h>
#include <unistd.h>

#include <string>

#include "comm/init.h"
#include "core/ember_core.h"
#include "nn/nn.h"
#include "parallel/ddp.h"
#include "parallel/sharded_data_parallel.h"
#include "tests/test_device.h"

using namespace ember;

int main(int argc, char** argv) {
  const bool stall = argc > 1 && std::string(argv[1]) == "stall";
  const std::string wrapper = argc > 2 ? argv[2] : "ddp";
  auto world = comm::init();
  const Device device = test::kTestDevice.is_cuda() ? Device::cuda(comm::read_environment().local_rank) : Device(kCPU);
  manual_seed(7);
  // Four 256x256 layers of 256 KB each; 0.3 MB buckets give one bucket per layer, so rank 1 dies
  // with some buckets posted and others not.
  auto model = nn::Sequential(nn::Linear(64, 256), nn::ReLU(), nn::Linear(256, 256), nn::ReLU(), nn::Linear(256, 256),
                              nn::ReLU(), nn::Linear(256, 256), nn::ReLU(), nn::Linear(256, 256), nn::ReLU(),
                              nn::Linear(256, 10))
                   .ptr();
  model->to(device);
  std::shared_ptr<nn::Module> ddp;
  if (wrapper == "ddp") {
    parallel::DDPOptions options;
    options.first_bucket_mb = 0.3;
    options.bucket_cap_mb = 0.3;
    ddp = std::make_shared<parallel::DistributedDataParallel>(model, world, options);
  } else {
    const int stage = wrapper == "stage2" ? 2 : 3;
    ddp = std::make_shared<parallel::ShardedDataParallel>(model, world,
                                                          parallel::ShardingOptions().stage(stage).bucket_cap_mb(0.3));
  }
  auto die = [stall] {
    static int calls = 0;
    if (++calls != 5) return;
    if (!stall) ::kill(::getpid(), SIGKILL);
    for (;;) ::pause();  // until the job is ended
  };
  if (world->rank() == 1 && wrapper == "stage3") {
    // Before the third Linear's forward: rank 0 goes on into that unit's all-gather.
    model->children()[4]->register_forward_pre_hook([die](nn::Module&) { die(); });
  } else if (world->rank() == 1) {
    // Backward reaches the second layer's weight after the buckets of the layers above it filled.
    model->named_parameters()[2].second.register_post_accumulate_grad_hook([die](const Tensor&) { die(); });
  }
  Generator g(11 + world->rank());
  for (int step = 0; step < 1000000; ++step) {
    Tensor x = randn({32, 64}, {}, &g).to(device);
    Tensor loss = ddp->forward(x).square().mean();
    loss.backward();
    model->zero_grad();
  }
  return 0;
}
