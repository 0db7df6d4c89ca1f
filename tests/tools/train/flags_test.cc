// The train tool's command line (tools/train/flags.h, config.h): every flag of --help is accepted
// in both spellings and lands in TrainConfig; every bad flag, value or combination raises a
// FlagError naming the flag and what it accepts (main() prints it and exits with status 2).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/backend.h"
#include "tools/train/config.h"

using namespace ember::train;

namespace {

// Parses `args` (without the program name) into a TrainConfig.
TrainConfig parse(std::vector<std::string> args) {
  Flags flags = make_flags();
  std::vector<const char*> argv{"train"};
  for (const auto& a : args) argv.push_back(a.c_str());
  bool run = flags.parse(static_cast<int>(argv.size()), argv.data());  // outside REQUIRE: it may throw
  REQUIRE(run);
  return config_from(flags);
}

std::string flag_error(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const FlagError& e) {
    return e.what();
  }
  return "(no FlagError)";
}

}  // namespace

TEST_CASE("--help documents every flag of the issue, with choices and defaults", "[train][flags]") {
  Flags flags = make_flags();
  const char* argv[] = {"train", "--lr", "0.5", "--help"};
  CHECK_FALSE(flags.parse(4, argv));
  std::string help = flags.help_text();
  for (const char* name : {"model",
                           "data",
                           "data-dir",
                           "epochs",
                           "batch-size",
                           "lr",
                           "momentum",
                           "weight-decay",
                           "optimizer",
                           "schedule",
                           "label-smoothing",
                           "workers",
                           "seed",
                           "device",
                           "data-parallel",
                           "devices",
                           "model-parallel",
                           "pipeline",
                           "chunks",
                           "pipeline-schedule",
                           "virtual-stages",
                           "pipeline-memory-budget",
                           "recompute",
                           "threads",
                           "checkpoint-dir",
                           "resume",
                           "log-dir",
                           "max-steps",
                           "eval-only",
                           "keep-checkpoints",
                           "log-every",
                           "progress",
                           "augment",
                           "cutout",
                           "flip-tta",
                           "synthetic-size",
                           "val-dir",
                           "image-size",
                           "image-channels",
                           "image-crop",
                           "image-mean",
                           "image-std"}) {
    INFO(name);
    CHECK_THAT(help, Catch::Contains("\n  --" + std::string(name) + " ") ||
                         Catch::Contains("\n  --" + std::string(name) + "\n"));
  }
  CHECK_THAT(help, Catch::Contains("--data {fashion-mnist,cifar10,cifar100,synthetic,imagefolder}"));
  CHECK_THAT(help, Catch::Contains("--image-crop {resized,padded}"));
  CHECK_THAT(help, Catch::Contains("--optimizer {sgd,adamw}"));
  CHECK_THAT(help, Catch::Contains("--schedule {cosine,onecycle,step}"));
  CHECK_THAT(help, Catch::Contains("--pipeline-schedule {gpipe,1f1b,interleaved,auto}"));
  CHECK_THAT(help, Catch::Contains("resnet20, resnet20-b,"));
  CHECK_THAT(help, Catch::Contains("(default: 128)"));
  const char* short_help[] = {"train", "-h"};
  CHECK_FALSE(make_flags().parse(2, short_help));
}

TEST_CASE("Defaults without flags", "[train][flags]") {
  TrainConfig c = parse({});
  CHECK(c.model == "resnet20");
  CHECK(c.data == "fashion-mnist");
  CHECK(c.epochs == 5);
  CHECK(c.batch_size == 128);
  CHECK(c.lr == 0.1);
  CHECK(c.optimizer == "sgd");
  CHECK(c.schedule == "onecycle");
  CHECK(c.max_steps == 0);
  CHECK_FALSE(c.eval_only);
  CHECK(c.augment);
  CHECK(c.keep_checkpoints == 2);
  CHECK(c.progress == "auto");
  CHECK_FALSE(c.deterministic);
  CHECK(parse({"--deterministic"}).deterministic);
}

TEST_CASE("Every flag is accepted as --name value and --name=value", "[train][flags]") {
  std::vector<std::pair<std::string, std::string>> values = {
      {"model", "lenet"},
      {"data", "cifar100"},
      {"data-dir", "/tmp/cifar"},
      {"epochs", "3"},
      {"batch-size", "64"},
      {"lr", "0.05"},
      {"momentum", "0.8"},
      {"weight-decay", "1e-4"},
      {"optimizer", "adamw"},
      {"schedule", "cosine"},
      {"label-smoothing", "0.1"},
      {"workers", "0"},
      {"seed", "42"},
      {"device", "cpu"},
      {"threads", "1"},
      {"checkpoint-dir", "ck"},
      {"keep-checkpoints", "3"},
      {"resume", "latest"},
      {"log-dir", "logs"},
      {"log-every", "7"},
      {"max-steps", "4"},
      {"progress", "lines"},
      {"augment", "off"},
      {"cutout", "8"},
      {"synthetic-size", "256"},
  };
  for (bool with_equals : {false, true}) {
    std::vector<std::string> args;
    for (const auto& [name, value] : values) {
      if (with_equals) {
        args.push_back("--" + name + "=" + value);
      } else {
        args.push_back("--" + name);
        args.push_back(value);
      }
    }
    args.push_back("--eval-only");
    args.push_back(with_equals ? "--flip-tta=true" : "--flip-tta");
    TrainConfig c = parse(args);
    CHECK(c.model == "lenet");
    CHECK(c.data == "cifar100");
    CHECK(c.data_dir == "/tmp/cifar");
    CHECK(c.epochs == 3);
    CHECK(c.batch_size == 64);
    CHECK(c.lr == 0.05);
    CHECK(c.momentum == 0.8);
    CHECK(c.weight_decay == 1e-4);
    CHECK(c.optimizer == "adamw");
    CHECK(c.schedule == "cosine");
    CHECK(c.label_smoothing == 0.1);
    CHECK(c.workers == 0);
    CHECK(c.seed == 42);
    CHECK(c.device == "cpu");
    CHECK(c.threads == 1);
    CHECK(c.checkpoint_dir == "ck");
    CHECK(c.keep_checkpoints == 3);
    CHECK(c.resume == "latest");
    CHECK(c.log_dir == "logs");
    CHECK(c.log_every == 7);
    CHECK(c.max_steps == 4);
    CHECK(c.progress == "lines");
    CHECK(c.eval_only);
    CHECK_FALSE(c.augment);
    CHECK(c.cutout == 8);
    CHECK(c.flip_tta);
    CHECK(c.synthetic_size == 256);
  }
  CHECK_FALSE(parse({"--flip-tta=false"}).flip_tta);
  CHECK(parse({"--model", "resnet18-imagenet"}).model == "resnet18-imagenet");
  // train_lib links the CUDA backend, and this test has no devices (EMBER_EMULATED_GPUS is unset):
  // the device is checked while parsing. tests/tools/train/train_cuda_test.sh covers the rest.
  CHECK(
      flag_error({"--device", "cuda:1"}) ==
      "--device cuda:1: cuda:1 does not exist: no CUDA device is available (no GPU, and EMBER_EMULATED_GPUS is unset)");
}

TEST_CASE("Bad flags and values name the flag, what it accepts and what it got", "[train][flags][errors]") {
  CHECK(flag_error({"--bogus"}) == "unknown flag --bogus (see --help)");
  CHECK(flag_error({"--bogus=1"}) == "unknown flag --bogus (see --help)");
  CHECK(flag_error({"lenet"}) == "unexpected argument 'lenet' (flags start with --; see --help)");
  CHECK(flag_error({"--epochs"}) == "--epochs: missing value");
  CHECK(flag_error({"--epochs", "two"}) == "--epochs: expected an integer, got 'two'");
  CHECK(flag_error({"--epochs="}) == "--epochs: expected an integer, got ''");
  CHECK(flag_error({"--epochs", "1e3"}) == "--epochs: expected an integer, got '1e3'");
  CHECK(flag_error({"--epochs", "0"}) == "--epochs: expected at least 1, got 0");
  CHECK(flag_error({"--epochs", "99999999999999999999"}) ==
        "--epochs: 99999999999999999999 is out of the 64-bit integer range");
  CHECK(flag_error({"--batch-size", "-4"}) == "--batch-size: expected at least 1, got -4");
  CHECK(flag_error({"--workers", "-1"}) == "--workers: expected at least 0, got -1");
  CHECK(flag_error({"--max-steps", "1.5"}) == "--max-steps: expected an integer, got '1.5'");
  CHECK(flag_error({"--lr", "fast"}) == "--lr: expected a finite number, got 'fast'");
  CHECK(flag_error({"--lr", "nan"}) == "--lr: expected a finite number, got 'nan'");
  CHECK(flag_error({"--lr", "inf"}) == "--lr: expected a finite number, got 'inf'");
  CHECK(flag_error({"--lr", "1e999"}) == "--lr: expected a finite number, got '1e999'");
  CHECK(flag_error({"--lr=-0.1"}) == "--lr: expected at least 0, got -0.1");
  CHECK(flag_error({"--data", "imagenet"}) ==
        "--data: expected one of {fashion-mnist, cifar10, cifar100, synthetic, imagefolder}, got 'imagenet'");
  CHECK(flag_error({"--optimizer", "adam"}) == "--optimizer: expected one of {sgd, adamw}, got 'adam'");
  CHECK(flag_error({"--schedule", "linear"}) == "--schedule: expected one of {cosine, onecycle, step}, got 'linear'");
  CHECK(flag_error({"--progress", "tty"}) == "--progress: expected one of {auto, bar, lines}, got 'tty'");
  CHECK(flag_error({"--augment", "yes"}) == "--augment: expected one of {on, off}, got 'yes'");
  CHECK(flag_error({"--eval-only=yes"}) == "--eval-only: is a switch (give it alone, or =true/=false), got 'yes'");
  CHECK_THAT(flag_error({"--model", "resnet19"}), Catch::Contains("--model: unknown model 'resnet19'"));
  CHECK_THAT(flag_error({"--device", "gpu"}), Catch::StartsWith("--device: ") && Catch::Contains("\"gpu\""));
  // Values that contradict each other.
  CHECK(flag_error({"--data", "cifar10"}) ==
        "--data cifar10 needs --data-dir (the folder with the binary batch files)");
  CHECK(flag_error({"--eval-only"}) == "--eval-only needs --resume (the weights to evaluate)");
  CHECK(flag_error({"--resume", "latest"}) == "--resume latest needs --checkpoint-dir");
  CHECK_THAT(flag_error({"--momentum", "1"}), Catch::StartsWith("--momentum: expected a value below 1"));
  CHECK(flag_error({"--label-smoothing", "1.5"}) == "--label-smoothing: expected a value in [0, 1]");
}

TEST_CASE("--data imagefolder's flags land in TrainConfig, with ImageNet's statistics by default",
          "[train][flags][imagefolder]") {
  TrainConfig c = parse({"--data", "imagefolder", "--data-dir", "/data/train", "--val-dir", "/data/val"});
  CHECK(c.data == "imagefolder");
  CHECK(c.data_dir == "/data/train");
  CHECK(c.val_dir == "/data/val");
  CHECK(c.image_size == 224);
  CHECK(c.image_channels == 3);
  CHECK(c.image_crop == "resized");
  CHECK(c.image_mean == std::vector<float>{0.485f, 0.456f, 0.406f});
  CHECK(c.image_std == std::vector<float>{0.229f, 0.224f, 0.225f});
  c = parse({"--data=imagefolder", "--data-dir=/d", "--image-size=28", "--image-channels=1", "--image-crop=padded"});
  CHECK(c.val_dir.empty());
  CHECK(c.image_size == 28);
  CHECK(c.image_channels == 1);
  CHECK(c.image_crop == "padded");
  CHECK(c.image_mean == std::vector<float>{0.449f});
  CHECK(c.image_std == std::vector<float>{0.226f});
  c = parse({"--data", "imagefolder", "--data-dir", "/d", "--image-mean", "0.5,0.25,0", "--image-std", "1,2,0.5"});
  CHECK(c.image_mean == std::vector<float>{0.5f, 0.25f, 0.0f});
  CHECK(c.image_std == std::vector<float>{1.0f, 2.0f, 0.5f});
}

TEST_CASE("--data imagefolder's flags: bad values and flags without the dataset name the flag",
          "[train][flags][imagefolder][errors]") {
  const std::vector<std::string> folder = {"--data", "imagefolder", "--data-dir", "/d"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = folder;
    args.insert(args.end(), more.begin(), more.end());
    return flag_error(args);
  };
  CHECK(flag_error({"--data", "imagefolder"}) ==
        "--data imagefolder needs --data-dir (the training tree: one folder of images per class)");
  for (const char* name : {"val-dir", "image-size", "image-channels", "image-crop", "image-mean", "image-std"}) {
    INFO(name);
    CHECK(flag_error({"--" + std::string(name), std::string(name) == "image-crop" ? "padded" : "1"}) ==
          "--" + std::string(name) +
              " needs --data imagefolder (--data fashion-mnist has images of a fixed size and format)");
  }
  CHECK(with({"--image-channels", "2"}) == "--image-channels: expected 1 (grayscale) or 3 (RGB), got 2");
  CHECK(with({"--image-size", "0"}) == "--image-size: expected at least 1, got 0");
  CHECK(with({"--image-crop", "center"}) == "--image-crop: expected one of {resized, padded}, got 'center'");
  CHECK(with({"--image-mean", "0.5"}) == "--image-mean: expected 3 values (--image-channels 3), got 1: '0.5'");
  CHECK(with({"--image-channels", "1", "--image-std", "0.2,0.2"}) ==
        "--image-std: expected 1 value (--image-channels 1), got 2: '0.2,0.2'");
  CHECK(with({"--image-mean", "0.5,x,0.5"}) ==
        "--image-mean: expected comma-separated numbers, one per channel, got '0.5,x,0.5'");
  CHECK(with({"--image-mean", "0.5,,0.5"}) ==
        "--image-mean: expected comma-separated numbers, one per channel, got '0.5,,0.5'");
  CHECK(with({"--image-std", "0.2,0,0.2"}) == "--image-std: expected positive values, got '0.2,0,0.2'");
  CHECK(with({"--image-std", "nan,1,1"}) ==
        "--image-std: expected comma-separated numbers, one per channel, got 'nan,1,1'");
  CHECK(with({"--eval-only", "--resume", "ck.safetensors"}) ==
        "--eval-only with --data imagefolder needs --val-dir (the images to evaluate on)");
}

TEST_CASE("DataParallel's flags: bad lists and contradictions name the flag, what it takes and what it got",
          "[train][flags][errors]") {
  CHECK(parse({}).data_parallel.empty());
  CHECK(parse({"--data-parallel", "0"}).data_parallel.empty());
  CHECK(flag_error({"--data-parallel", "-1"}) == "--data-parallel: expected at least 0, got -1");
  CHECK(flag_error({"--data-parallel", "2", "--device", "cpu"}) ==
        "--data-parallel 2: DataParallel trains on CUDA devices, but --device is cpu; give --device cuda, or leave "
        "--device out");
  CHECK(flag_error({"--data-parallel", "2", "--device", "cuda:1"}) ==
        "--data-parallel 2 keeps the model on cuda:0, but --device is cuda:1; give --device cuda (--data-parallel N "
        "trains on cuda:0 to cuda:N-1), or list other devices with --devices, e.g. --devices cuda:1,...");
  CHECK(flag_error({"--devices", "cuda:1,cuda:0", "--device", "cuda:0"}) ==
        "--devices cuda:1,cuda:0 keeps the model on cuda:1, but --device is cuda:0; give --device cuda or --device "
        "cuda:1 (the first device listed holds the model)");
  CHECK(flag_error({"--data-parallel", "2", "--devices", "cuda:0,cuda:1"}) ==
        "--data-parallel 2 and --devices cuda:0,cuda:1: give one of them (--data-parallel N trains on cuda:0 to "
        "cuda:N-1, --devices on the CUDA devices it lists)");
  CHECK(flag_error({"--devices", "cuda:0,,cuda:1"}) ==
        "--devices cuda:0,,cuda:1: entry 2 is empty; expected a comma-separated list of CUDA devices, such as "
        "cuda:0,cuda:1");
  CHECK(flag_error({"--devices="}) ==
        "--devices: expected a comma-separated list of CUDA devices, such as cuda:0,cuda:1, got ''");
  CHECK(flag_error({"--devices", "cuda:0,"}) ==
        "--devices cuda:0,: entry 2 is empty; expected a comma-separated list of CUDA devices, such as cuda:0,cuda:1");
  for (const char* bad : {"cpu", "cuda", "gpu:1", "cuda:x", "cuda:-1"}) {
    INFO(bad);
    CHECK(flag_error({"--devices", std::string("cuda:0,") + bad}) ==
          "--devices cuda:0," + std::string(bad) + ": entry 2 is '" + bad +
              "'; expected a CUDA device cuda:N (DataParallel replicates the model onto CUDA devices), as in "
              "cuda:0,cuda:1");
  }
  CHECK(flag_error({"--devices", "cuda:1,cuda:0,cuda:1"}) ==
        "--devices cuda:1,cuda:0,cuda:1: lists cuda:1 twice (entries 1 and 3); each device holds one replica");
  // This test has no devices (EMBER_EMULATED_GPUS is unset); train_data_parallel_test.sh has two.
  CHECK(flag_error({"--data-parallel", "2"}) ==
        "--data-parallel 2: needs 2 CUDA devices (cuda:0 to cuda:1), but no CUDA device is available (no GPU, and "
        "EMBER_EMULATED_GPUS is unset)");
  CHECK(flag_error({"--devices", "cuda:0"}) ==
        "--devices cuda:0: cuda:0 does not exist: no CUDA device is available (no GPU, and EMBER_EMULATED_GPUS is "
        "unset)");
}

TEST_CASE("Split-model flags: --model-parallel and --pipeline with its own flags; clashes name both flags",
          "[train][flags][errors]") {
  TrainConfig c = parse({});
  CHECK(c.model_parallel.empty());
  CHECK(c.pipeline.empty());
  CHECK(c.chunks == 4);
  CHECK(c.pipeline_schedule == "gpipe");
  CHECK_FALSE(c.recompute);
  CHECK(parse({"--model-parallel", "0", "--pipeline", "0"}).model_parallel.empty());
  CHECK(flag_error({"--model-parallel", "-1"}) == "--model-parallel: expected at least 0, got -1");
  CHECK(flag_error({"--pipeline", "-2"}) == "--pipeline: expected at least 0, got -2");
  CHECK(flag_error({"--pipeline", "2", "--chunks", "0"}) == "--chunks: expected at least 1, got 0");
  CHECK(flag_error({"--pipeline", "2", "--pipeline-schedule", "zero-bubble"}) ==
        "--pipeline-schedule: expected one of {gpipe, 1f1b, interleaved, auto}, got 'zero-bubble'");
  CHECK(flag_error({"--pipeline", "2", "--pipeline-schedule", "interleaved", "--virtual-stages", "1"}) ==
        "--virtual-stages: expected at least 2, got 1");
  CHECK(flag_error({"--pipeline", "2", "--virtual-stages", "3"}) ==
        "--virtual-stages needs --pipeline-schedule interleaved (the other schedules hold one model chunk per device, "
        "auto chooses), got --pipeline-schedule gpipe");
  CHECK(flag_error({"--pipeline", "2", "--pipeline-schedule", "1f1b", "--pipeline-memory-budget", "64"}) ==
        "--pipeline-memory-budget needs --pipeline-schedule auto (it bounds what auto may choose), got "
        "--pipeline-schedule 1f1b");
  CHECK(flag_error({"--pipeline", "2", "--pipeline-schedule", "auto", "--pipeline-memory-budget", "-1"}) ==
        "--pipeline-memory-budget: expected at least 0, got -1");
  // The pipeline's own flags without a pipeline.
  CHECK(flag_error({"--chunks", "8"}) == "--chunks needs --pipeline N (it sets how the pipeline's micro-batches run)");
  CHECK(flag_error({"--model-parallel", "2", "--chunks", "8"}) ==
        "--chunks needs --pipeline N (it sets how the pipeline's micro-batches run)");
  CHECK(flag_error({"--pipeline-schedule", "1f1b"}) ==
        "--pipeline-schedule needs --pipeline N (it sets how the pipeline's micro-batches run)");
  CHECK(flag_error({"--recompute"}) == "--recompute needs --pipeline N (it sets how the pipeline's micro-batches run)");
  CHECK(flag_error({"--virtual-stages", "2"}) ==
        "--virtual-stages needs --pipeline N (it sets how the pipeline's micro-batches run)");
  // Contradictions, named before the device count is looked at.
  CHECK(flag_error({"--model-parallel", "2", "--pipeline", "3"}) ==
        "--model-parallel 2 and --pipeline 3: give one of them (--model-parallel N runs the stages in turn, "
        "--pipeline N overlaps them on micro-batches)");
  CHECK(flag_error({"--model-parallel", "2", "--data-parallel", "2"}) ==
        "--model-parallel 2 and --data-parallel 2: give one of them (this tool splits the model across devices or "
        "replicates it with DataParallel, not both)");
  CHECK(flag_error({"--pipeline", "2", "--devices", "cuda:0,cuda:1"}) ==
        "--pipeline 2 and --devices cuda:0,cuda:1: give one of them (this tool splits the model across devices or "
        "replicates it with DataParallel, not both)");
  CHECK(flag_error({"--model-parallel", "2", "--device", "cpu"}) ==
        "--model-parallel 2 places the model's stages on cuda:0 to cuda:1, but --device is cpu; give --device cuda, "
        "or leave --device out");
  CHECK(flag_error({"--pipeline", "3", "--device", "cuda:1"}) ==
        "--pipeline 3 places the model's stages on cuda:0 to cuda:2, but --device is cuda:1; give --device cuda, or "
        "leave --device out");
  CHECK_THAT(flag_error({"--pipeline", "2", "--device", "tpu"}), Catch::StartsWith("--device: "));
  // This test has no devices (EMBER_EMULATED_GPUS is unset); train_model_parallel_test.sh has two.
  CHECK(flag_error({"--model-parallel", "2"}) ==
        "--model-parallel 2: needs 2 CUDA devices (cuda:0 to cuda:1), but no CUDA device is available (no GPU, and "
        "EMBER_EMULATED_GPUS is unset)");
  CHECK(flag_error({"--pipeline", "1", "--chunks", "2", "--recompute", "--device", "cuda"}) ==
        "--pipeline 1: needs 1 CUDA device (cuda:0), but no CUDA device is available (no GPU, and EMBER_EMULATED_GPUS "
        "is unset)");
}
