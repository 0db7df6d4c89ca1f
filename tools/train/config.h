// The train tool's configuration, built from its command line (see --help).
#pragma once

#include <string>
#include <vector>

#include "tools/train/flags.h"

namespace ember::train {

struct TrainConfig {
  std::string model = "resnet20";
  std::string data = "fashion-mnist";
  std::string data_dir;  // empty: the dataset's default (Fashion-MNIST from the Debian package)
  // --data imagefolder: the evaluation tree (empty: the run does not evaluate), the side of the
  // square images the model sees, 3 (RGB) or 1 (grayscale), how training crops ("resized": the
  // ImageNet recipe's RandomResizedCrop, evaluation at Resize(S * 256 / 224) + CenterCrop(S);
  // "padded": images brought to S x S, then the small-image recipe's padded RandomCrop), and the
  // normalisation (empty: ImageNet's statistics).
  std::string val_dir;
  int64_t image_size = 224;
  int64_t image_channels = 3;
  std::string image_crop = "resized";
  std::vector<float> image_mean, image_std;
  int64_t epochs = 5;
  int64_t batch_size = 128;  // per process (DataParallel splits it across its devices)
  double lr = 0.1;           // peak learning rate
  double momentum = 0.9;
  double weight_decay = 5e-4;
  std::string optimizer = "sgd";
  std::string schedule = "onecycle";
  double label_smoothing = 0.0;
  int64_t workers = 1;
  uint64_t seed = 0;
  std::string device = "cpu";  // with DataParallel: data_parallel[0], where the model lives; split: cuda:0
  // DataParallel's devices ("cuda:0", "cuda:1", ...) from --data-parallel or --devices; empty: one
  // device per process (alone, or DDP under a launcher).
  std::vector<std::string> data_parallel;
  // The model split into stages on cuda:0 to cuda:N-1, from --model-parallel N (ModelParallel: the
  // stages run in turn) or --pipeline N (Pipeline: micro-batches overlap the stages); empty: off.
  // Either is one process, like DataParallel.
  std::vector<std::string> model_parallel;
  std::vector<std::string> pipeline;
  int64_t chunks = 4;                       // --pipeline: micro-batches per batch
  std::string pipeline_schedule = "gpipe";  // --pipeline: "gpipe", "1f1b", "interleaved" or "auto"
  int64_t virtual_stages = 1;               // --pipeline-schedule interleaved: chunks per device
  double pipeline_memory_budget_mb = 0;     // --pipeline-schedule auto: activation MB per device
  bool recompute = false;                   // --pipeline: stages rerun their forward in the backward
  // Under a launcher: ShardedDataParallel at this ZeRO stage (1, 2 or 3) instead of DDP; its
  // checkpoints are directories of per-rank shards. 0: DDP.
  int64_t shard_stage = 0;
  int64_t threads = 0;         // 0: EMBER_NUM_THREADS or every core
  bool deterministic = false;  // fixed kernels (core/kernel_select.h heuristic mode)
  // Mixed precision: "off", "bf16" (autocast to bfloat16) or "fp16" (autocast to float16, CUDA
  // only, with a gradient scaler started at amp_init_scale that doubles it every
  // amp_growth_interval clean steps).
  std::string amp = "off";
  double amp_init_scale = 65536.0;
  int64_t amp_growth_interval = 2000;
  double bucket_cap_mb = 25;  // DDP's bucket cap; -1 (parallel::kAuto): chosen by measurement
  std::string checkpoint_dir;
  int64_t keep_checkpoints = 2;
  int64_t checkpoint_every = 0;  // steps between mid-epoch checkpoints (last.safetensors); 0: none
  std::string resume;            // a checkpoint path, or "latest" (the newest in checkpoint_dir)
  std::string log_dir;
  int64_t log_every = 50;
  // --profile: a timeline of this run's steps profile_first_step..profile_last_step (from 1).
  std::string profile_dir;
  int64_t profile_first_step = 3, profile_last_step = 5;
  std::string progress = "auto";  // "bar", "lines", or "auto" (a bar when stdout is a terminal)
  int64_t max_steps = 0;          // 0: no limit
  bool eval_only = false;
  bool augment = true;
  int64_t cutout = 0;
  bool flip_tta = false;
  int64_t synthetic_size = 10000;
};

// Registers every flag with its default and help text.
Flags make_flags();
// Reads the parsed flags; raises FlagError for values that contradict each other.
TrainConfig config_from(const Flags& flags);

}  // namespace ember::train
