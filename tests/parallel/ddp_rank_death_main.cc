// Rank 1 kills itself (SIGKILL) in the middle of a DDP backward while rank 0 trains on: rank 0 is
// then inside its own backward with bucket all-reduces posted and in flight, and must say so when
// it ends (ddp_rank_death_test.sh checks its stderr, whether mpirun's SIGTERM or the collective
// timeout ends it).
#include <signal.h>
#include <unistd.h>

#include "comm/init.h"
#include "core/ember_core.h"
#include "nn/nn.h"
#include "parallel/ddp.h"

using namespace ember;

int main() {
  auto world = comm::init();
  manual_seed(7);
  // Four 256x256 layers of 256 KB each; 0.3 MB buckets give one bucket per layer, so rank 1 dies
  // with some buckets posted and others not.
  auto model = nn::Sequential(nn::Linear(64, 256), nn::ReLU(), nn::Linear(256, 256), nn::ReLU(),
                              nn::Linear(256, 256), nn::ReLU(), nn::Linear(256, 256), nn::ReLU(),
                              nn::Linear(256, 256), nn::ReLU(), nn::Linear(256, 10))
                   .ptr();
  parallel::DDPOptions options;
  options.first_bucket_mb = 0.3;
  options.bucket_cap_mb = 0.3;
  auto ddp = std::make_shared<parallel::DistributedDataParallel>(model, world, options);
  // Backward reaches the second layer's weight after the buckets of the layers above it filled.
  Tensor victim = model->named_parameters()[2].second;
  if (world->rank() == 1) {
    victim.register_post_accumulate_grad_hook([](const Tensor&) {
      static int calls = 0;
      if (++calls == 5) ::kill(::getpid(), SIGKILL);
    });
  }
  Generator g(11 + world->rank());
  for (int step = 0; step < 1000000; ++step) {
    Tensor x = randn({32, 64}, {}, &g);
    Tensor loss = ddp->forward(x).square().mean();
    loss.backward();
    model->zero_grad();
  }
  return 0;
}
