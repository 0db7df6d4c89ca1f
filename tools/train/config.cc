// Flag definitions and their translation into a TrainConfig.
#include "tools/train/config.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "comm/init.h"
#include "core/backend.h"
#include "core/device.h"
#include "core/error.h"
#include "models/zoo.h"

namespace ember::train {

namespace {

// "this machine has 2 CUDA devices (cuda:0 to cuda:1)", or why it has none.
std::string machine_devices(int count) {
  if (count == 0) return "no CUDA device is available (no GPU, and EMBER_EMULATED_GPUS is unset)";
  return "this machine has " + std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") +
         (count == 1 ? std::string(" (cuda:0)") : " (cuda:0 to cuda:" + std::to_string(count - 1) + ")");
}

// The device a run trains on, checked before any set-up: a device this build or machine lacks
// is bad input (exit status 2), not a failure halfway into loading data.
std::string resolve_device(const std::string& text) {
  Device device;
  try {
    device = Device::parse(text);
  } catch (const Error& e) {
    throw FlagError(std::string("--device: ") + e.what());
  }
  if (!has_backend(device.type))
    throw FlagError("--device: this build has no backend for '" + text + "'; use --device cpu");
  if (!device.is_cuda()) return device.str();
  comm::LaunchEnvironment launch;
  try {
    launch = comm::read_environment();
  } catch (const Error& e) {
    throw FlagError(std::string("--device ") + text + ": " + e.what());
  }
  // Bare "cuda" under a launcher: one device per process on the node, as torchrun users expect.
  if (text == "cuda" && launch.launched) device = Device::cuda(launch.local_rank);
  const int count = device_count(kCUDA);
  if (device.index >= count) {
    std::string message = "--device " + text + ": ";
    if (launch.launched && text == "cuda")
      message += "rank " + std::to_string(launch.rank) + " has LOCAL_RANK " + std::to_string(launch.local_rank) +
                 " and so takes " + device.str() + ", but ";
    else
      message += device.str() + " does not exist: ";
    message += machine_devices(count);
    if (launch.launched && text == "cuda" && count > 0)
      message += "; start at most " + std::to_string(count) + " processes per node";
    throw FlagError(message);
  }
  // DDP's gradients live on the device: a backend that cannot carry them would fail at the first
  // backward, after the data has loaded.
  if (launch.launched && (launch.backend == "mpi" || launch.backend == "gloo"))
    throw FlagError("--device " + text + " under a launcher: EMBER_BACKEND=" + launch.backend +
                    " carries CPU tensors only, and rank " + std::to_string(launch.rank) + "'s gradients would be on " +
                    device.str() + "; leave EMBER_BACKEND unset (CUDA tensors then go over NCCL)");
  return device.str();
}

// --devices' entries: CUDA devices "cuda:N", each once.
std::vector<Device> parse_device_list(const std::string& list) {
  std::vector<Device> devices;
  size_t start = 0;
  for (size_t entry = 1;; ++entry) {
    const size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    const std::string where = "--devices " + list + ": entry " + std::to_string(entry);
    if (item.empty())
      throw FlagError(where + " is empty; expected a comma-separated list of CUDA devices, such as cuda:0,cuda:1");
    bool cuda = item.rfind("cuda:", 0) == 0;
    Device device;
    if (cuda) {
      try {
        device = Device::parse(item);
      } catch (const Error&) {
        cuda = false;
      }
    }
    if (!cuda)
      throw FlagError(where + " is '" + item +
                      "'; expected a CUDA device cuda:N (DataParallel replicates the model "
                      "onto CUDA devices), as in cuda:0,cuda:1");
    for (size_t j = 0; j < devices.size(); ++j) {
      if (devices[j] == device)
        throw FlagError("--devices " + list + ": lists " + device.str() + " twice (entries " + std::to_string(j + 1) +
                        " and " + std::to_string(entry) + "); each device holds one replica");
    }
    devices.push_back(device);
    if (comma == std::string::npos) return devices;
    start = comma + 1;
  }
}

// DataParallel's devices, from --data-parallel N (cuda:0 to cuda:N-1) or --devices LIST, checked
// against --device, the launcher and the machine; empty when neither flag asks for DataParallel.
// A run with either flag is one process: DataParallel and DDP do not combine here.
std::vector<std::string> resolve_data_parallel(const Flags& f) {
  const long long n = f.get_int("data-parallel");
  const std::string list = f.get_string("devices");
  if (list.empty() && f.was_set("devices"))
    throw FlagError("--devices: expected a comma-separated list of CUDA devices, such as cuda:0,cuda:1, got ''");
  if (n == 0 && list.empty()) return {};
  const std::string flag = n > 0 ? "--data-parallel " + std::to_string(n) : "--devices " + list;
  if (n > 0 && !list.empty())
    throw FlagError("--data-parallel " + std::to_string(n) + " and --devices " + list +
                    ": give one of them "
                    "(--data-parallel N trains on cuda:0 to cuda:N-1, --devices on the CUDA devices it lists)");
  std::vector<Device> devices = n > 0 ? std::vector<Device>{Device::cuda(0)} : parse_device_list(list);
  const Device first = devices.front();
  if (f.was_set("device")) {
    const std::string text = f.get_string("device");
    Device device;
    try {
      device = Device::parse(text);
    } catch (const Error& e) {
      throw FlagError(std::string("--device: ") + e.what());
    }
    if (!device.is_cuda())
      throw FlagError(flag + ": DataParallel trains on CUDA devices, but --device is " + text +
                      "; give --device cuda, or leave --device out");
    if (text != "cuda" && device != first)
      throw FlagError(flag + " keeps the model on " + first.str() + ", but --device is " + text +
                      "; give --device cuda" +
                      (n > 0 ? " (--data-parallel N trains on cuda:0 to cuda:N-1), or list other devices with "
                               "--devices, e.g. --devices " +
                                   text + ",..."
                             : " or --device " + first.str() + " (the first device listed holds the model)"));
  }
  comm::LaunchEnvironment launch;
  try {
    launch = comm::read_environment();
  } catch (const Error& e) {
    throw FlagError(flag + ": " + e.what());
  }
  if (launch.launched && launch.world_size > 1)
    throw FlagError(flag + ": this process is rank " + std::to_string(launch.rank) + " of " +
                    std::to_string(launch.world_size) + " (" + launch.source +
                    "), but DataParallel drives several "
                    "devices from one process and DDP one device per process; this tool does not combine them. "
                    "Under a launcher leave out " +
                    (n > 0 ? "--data-parallel" : "--devices") +
                    " (each rank then trains on cuda:LOCAL_RANK with DDP), or start one process");
  if (!has_backend(kCUDA)) throw FlagError(flag + ": this build has no CUDA backend");
  const int count = device_count(kCUDA);
  if (n > count)
    throw FlagError(flag + ": needs " + std::to_string(n) + " CUDA devices (" +
                    (n == 1 ? std::string("cuda:0") : "cuda:0 to cuda:" + std::to_string(n - 1)) + "), but " +
                    machine_devices(count));
  for (long long i = 1; i < n; ++i) devices.push_back(Device::cuda(static_cast<int>(i)));
  std::vector<std::string> names;
  for (const Device& d : devices) {
    if (d.index >= count) throw FlagError(flag + ": " + d.str() + " does not exist: " + machine_devices(count));
    names.push_back(d.str());
  }
  return names;
}

// The stages' devices of --model-parallel N or --pipeline N (cuda:0 to cuda:N-1) into `c`, checked
// against each other, DataParallel's flags, --device, the launcher and the machine; the pipeline's
// own flags need --pipeline.
void resolve_split(const Flags& f, TrainConfig& c) {
  const long long model_parallel = f.get_int("model-parallel"), pipeline = f.get_int("pipeline");
  if (pipeline == 0) {
    for (const char* name : {"chunks", "pipeline-schedule", "recompute", "virtual-stages", "pipeline-memory-budget"})
      if (f.was_set(name))
        throw FlagError("--" + std::string(name) +
                        " needs --pipeline N (it sets how the pipeline's micro-batches run)");
  }
  if (model_parallel == 0 && pipeline == 0) return;
  const std::string schedule = f.get_string("pipeline-schedule");
  if (f.was_set("virtual-stages") && schedule != "interleaved")
    throw FlagError(
        "--virtual-stages needs --pipeline-schedule interleaved (the other schedules hold one model "
        "chunk per device, auto chooses), got --pipeline-schedule " +
        schedule);
  if (f.was_set("pipeline-memory-budget") && schedule != "auto")
    throw FlagError(
        "--pipeline-memory-budget needs --pipeline-schedule auto (it bounds what auto may choose), got "
        "--pipeline-schedule " +
        schedule);
  if (model_parallel > 0 && pipeline > 0)
    throw FlagError("--model-parallel " + std::to_string(model_parallel) + " and --pipeline " +
                    std::to_string(pipeline) +
                    ": give one of them (--model-parallel N runs the stages in turn, "
                    "--pipeline N overlaps them on micro-batches)");
  const long long n = model_parallel > 0 ? model_parallel : pipeline;
  const std::string flag = (model_parallel > 0 ? "--model-parallel " : "--pipeline ") + std::to_string(n);
  const std::string range = n == 1 ? std::string("cuda:0") : "cuda:0 to cuda:" + std::to_string(n - 1);
  if (f.get_int("data-parallel") > 0 || !f.get_string("devices").empty()) {
    const std::string other = f.get_int("data-parallel") > 0
                                  ? "--data-parallel " + std::to_string(f.get_int("data-parallel"))
                                  : "--devices " + f.get_string("devices");
    throw FlagError(flag + " and " + other +
                    ": give one of them (this tool splits the model across devices or "
                    "replicates it with DataParallel, not both)");
  }
  if (f.was_set("device")) {
    const std::string text = f.get_string("device");
    Device device;
    try {
      device = Device::parse(text);
    } catch (const Error& e) {
      throw FlagError(std::string("--device: ") + e.what());
    }
    if (!device.is_cuda() || (text != "cuda" && device != Device::cuda(0)))
      throw FlagError(flag + " places the model's stages on " + range + ", but --device is " + text +
                      "; give --device cuda, or leave --device out");
  }
  comm::LaunchEnvironment launch;
  try {
    launch = comm::read_environment();
  } catch (const Error& e) {
    throw FlagError(flag + ": " + e.what());
  }
  if (launch.launched && launch.world_size > 1)
    throw FlagError(flag + ": this process is rank " + std::to_string(launch.rank) + " of " +
                    std::to_string(launch.world_size) + " (" + launch.source + "), but " +
                    flag.substr(0, flag.find(' ')) +
                    " splits the model across the devices of one process, and this tool does not combine that with "
                    "DDP; start one process");
  if (!has_backend(kCUDA)) throw FlagError(flag + ": this build has no CUDA backend");
  const int count = device_count(kCUDA);
  if (n > count)
    throw FlagError(flag + ": needs " + std::to_string(n) + " CUDA device" + (n == 1 ? "" : "s") + " (" + range +
                    "), but " + machine_devices(count));
  std::vector<std::string>& devices = model_parallel > 0 ? c.model_parallel : c.pipeline;
  for (long long i = 0; i < n; ++i) devices.push_back(Device::cuda(static_cast<int>(i)).str());
  c.chunks = f.get_int("chunks");
  c.pipeline_schedule = schedule;
  c.recompute = f.get_bool("recompute");
  c.virtual_stages = schedule == "interleaved" ? f.get_int("virtual-stages") : 1;
  c.pipeline_memory_budget_mb = f.get_double("pipeline-memory-budget");
}

// --amp and the gradient scaler's flags into `c`, checked against the device the run trains on
// (c.device, resolved before): the CPU autocasts to bfloat16 only, as in PyTorch.
void resolve_amp(const Flags& f, TrainConfig& c) {
  c.amp = f.get_string("amp");
  if (c.amp != "fp16") {
    for (const char* name : {"amp-init-scale", "amp-growth-interval"})
      if (f.was_set(name))
        throw FlagError("--" + std::string(name) + " needs --amp fp16 (it sets float16's gradient scaler; " +
                        (c.amp == "bf16" ? "bfloat16 autocast needs none" : "there is none without --amp") + ")");
    if (c.amp == "off") return;
  }
  if (c.amp == "fp16" && Device::parse(c.device).is_cpu())
    throw FlagError(
        "--amp fp16: this run trains on the CPU (--device cpu), which autocasts to bfloat16 only; give --amp bf16 "
        "on the CPU, or train on a CUDA device for float16");
  c.amp_init_scale = f.get_double("amp-init-scale");
  if (!(c.amp_init_scale > 0)) throw FlagError("--amp-init-scale: expected a positive scale, got 0");
  c.amp_growth_interval = f.get_int("amp-growth-interval");
}

// "0.5,0.25" as floats, for --image-mean and --image-std.
std::vector<float> parse_floats(const std::string& flag, const std::string& text) {
  std::vector<float> values;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || !std::isfinite(value))
      throw FlagError("--" + flag + ": expected comma-separated numbers, one per channel, got '" + text + "'");
    values.push_back(static_cast<float>(value));
    if (comma == std::string::npos) return values;
    start = comma + 1;
  }
}

// --data imagefolder's flags into `c`; the others refuse them, since they would change nothing.
void resolve_image_folder(const Flags& f, TrainConfig& c) {
  const char* const image_flags[] = {"val-dir",    "image-size", "image-channels",
                                     "image-crop", "image-mean", "image-std"};
  if (c.data != "imagefolder") {
    for (const char* name : image_flags)
      if (f.was_set(name))
        throw FlagError("--" + std::string(name) + " needs --data imagefolder (--data " + c.data +
                        " has images of a fixed size and format)");
    return;
  }
  if (c.data_dir.empty())
    throw FlagError("--data imagefolder needs --data-dir (the training tree: one folder of images per class)");
  c.val_dir = f.get_string("val-dir");
  c.image_size = f.get_int("image-size");
  c.image_channels = f.get_int("image-channels");
  if (c.image_channels != 1 && c.image_channels != 3)
    throw FlagError("--image-channels: expected 1 (grayscale) or 3 (RGB), got " + std::to_string(c.image_channels));
  c.image_crop = f.get_string("image-crop");
  const bool gray = c.image_channels == 1;
  // Grayscale runs take the average of ImageNet's statistics, as timm does for one input channel.
  c.image_mean = gray ? std::vector<float>{0.449f} : std::vector<float>{0.485f, 0.456f, 0.406f};
  c.image_std = gray ? std::vector<float>{0.226f} : std::vector<float>{0.229f, 0.224f, 0.225f};
  for (const char* name : {"image-mean", "image-std"}) {
    if (!f.was_set(name)) continue;
    std::vector<float> values = parse_floats(name, f.get_string(name));
    if (static_cast<int64_t>(values.size()) != c.image_channels)
      throw FlagError("--" + std::string(name) + ": expected " + std::to_string(c.image_channels) + " value" +
                      (gray ? "" : "s") + " (--image-channels " + std::to_string(c.image_channels) + "), got " +
                      std::to_string(values.size()) + ": '" + f.get_string(name) + "'");
    if (std::string(name) == "image-std") {
      for (float v : values)
        if (!(v > 0)) throw FlagError("--image-std: expected positive values, got '" + f.get_string(name) + "'");
      c.image_std = values;
    } else {
      c.image_mean = values;
    }
  }
}

}  // namespace

Flags make_flags() {
  Flags f("train",
          "Trains a model with Ember, alone or under `mpirun -np N` (one process per rank; --batch-size is\n"
          "per process, so N ranks train with an N-times larger global batch).");
  std::string models;
  for (const auto& m : models::model_names()) models += (models.empty() ? "" : ", ") + m;
  f.add_string("model", "resnet20", "model to train: " + models);
  f.add_string("data", "fashion-mnist",
               "dataset (imagefolder: JPEG/PNG files in one folder per class, as torchvision's ImageFolder)",
               {"fashion-mnist", "cifar10", "cifar100", "synthetic", "imagefolder"});
  f.add_string("data-dir", "",
               "directory of the dataset files (default for fashion-mnist: the Debian package's "
               "/usr/share/datasets/fashion-mnist; required for cifar10/cifar100; for imagefolder the training "
               "tree, DIR/CLASS/IMAGE)");
  f.add_string("val-dir", "",
               "with --data imagefolder: the evaluation tree, with the same class folders as --data-dir (without "
               "it the run trains without evaluating)");
  f.add_int("image-size", 224,
            "with --data imagefolder: the side of the square images the model sees (training crop, and the "
            "evaluation's centre crop)",
            1);
  f.add_int("image-channels", 3, "with --data imagefolder: 3 decodes images to RGB, 1 to grayscale", 1);
  f.add_string("image-crop", "resized",
               "with --data imagefolder: the ImageNet recipe (resized: training on RandomResizedCrop(S) and flip, "
               "evaluation on Resize(round(S * 256 / 224)) + CenterCrop(S)), or the small-image one (padded: "
               "images resized to S and centre-cropped, training on a random crop padded by 2 below 32 pixels, else "
               "4, and flip); --augment off trains on the evaluation's images",
               {"resized", "padded"});
  f.add_string("image-mean", "",
               "with --data imagefolder: per-channel means of Normalize, comma-separated, pixels in [0, 1] (default: "
               "ImageNet's 0.485,0.456,0.406; with --image-channels 1 their average, 0.449)");
  f.add_string("image-std", "",
               "with --data imagefolder: per-channel standard deviations of Normalize (default: ImageNet's "
               "0.229,0.224,0.225; with --image-channels 1 their average, 0.226)");
  f.add_int("epochs", 5, "epochs to train", 1);
  f.add_int("batch-size", 128, "examples per step and process (DataParallel splits them across its devices)", 1);
  f.add_double("lr", 0.1, "peak learning rate", 0.0);
  f.add_double("momentum", 0.9, "SGD momentum (AdamW: beta1)", 0.0);
  f.add_double("weight-decay", 5e-4, "weight decay (not applied to biases and normalisation parameters)", 0.0);
  f.add_string("optimizer", "sgd", "optimizer (SGD with Nesterov momentum, or AdamW)", {"sgd", "adamw"});
  f.add_string("schedule", "onecycle",
               "learning-rate schedule per step: cosine annealing, one-cycle, or x0.1 "
               "steps at 50% and 75% of training",
               {"cosine", "onecycle", "step"});
  f.add_double("label-smoothing", 0.0, "label smoothing of the cross-entropy loss", 0.0);
  f.add_int("workers", 1, "data-loader worker threads (0: load on the training thread)", 0);
  f.add_int("seed", 0, "seed of initialisation, shuffling, augmentation and dropout", 0);
  f.add_string("device", "cpu",
               "device to train on: cpu, cuda:N, or cuda (cuda:LOCAL_RANK under mpirun/srun, "
               "else cuda:0)");
  f.add_int("data-parallel", 0,
            "train with DataParallel on cuda:0 to cuda:N-1 in one process (0: off): each step "
            "splits the batch across the devices and computes the loss on each; the model and optimizer live on "
            "cuda:0",
            0);
  f.add_string("devices", "",
               "train with DataParallel on these CUDA devices, comma-separated (e.g. cuda:0,cuda:2); "
               "the first holds the model");
  f.add_int("model-parallel", 0,
            "split the model into N stages on cuda:0 to cuda:N-1 in one process (ModelParallel; "
            "0: off): layers balanced by parameter count, the stages run in turn on each whole batch",
            0);
  f.add_int("pipeline", 0,
            "split the model into N pipeline stages on cuda:0 to cuda:N-1 in one process (0: off): "
            "layers balanced by parameter count, each batch split into --chunks micro-batches that overlap the "
            "stages",
            0);
  f.add_int("chunks", 4, "micro-batches per batch with --pipeline", 1);
  f.add_string("pipeline-schedule", "gpipe",
               "with --pipeline: every micro-batch's forward, then every backward "
               "(gpipe), one forward one backward, holding fewer activations (1f1b), 1f1b over --virtual-stages "
               "model chunks per device, a smaller bubble for more messages (interleaved), or chosen by measuring "
               "the layers and simulating each schedule and micro-batch count up to --chunks at the first step (auto)",
               {"gpipe", "1f1b", "interleaved", "auto"});
  f.add_int("virtual-stages", 2, "with --pipeline-schedule interleaved: model chunks per device", 2);
  f.add_double("pipeline-memory-budget", 0,
               "with --pipeline-schedule auto: MB of activations a device may hold (0: no limit)");
  f.add_bool("recompute",
             "with --pipeline: keep only each stage's micro-batch inputs and rerun the forward in the "
             "backward (less memory, about a third more compute)");
  f.add_int("shard-stage", 0,
            "under a launcher, ShardedDataParallel instead of DDP: shard the optimizer state (1), the gradients too "
            "(2), or the parameters too (3, fully sharded); checkpoints are then directories of per-rank shards "
            "that --resume loads at any process count (0: DDP)",
            0);
  f.add_int("threads", 0, "compute threads per process (0: EMBER_NUM_THREADS, else every core)", 0);
  f.add_bool("deterministic",
             "run the same kernels every time (EMBER_KERNEL_SELECT=heuristic): no timing trials "
             "on a shape's first use, so two runs with the same seed give the same numbers");
  f.add_string("amp", "off",
               "mixed precision: the forward and the loss under autocast to bfloat16 (bf16, on the CPU or CUDA) or "
               "float16 (fp16, CUDA only, with a gradient scaler), as torch.autocast and GradScaler",
               {"off", "bf16", "fp16"});
  f.add_double("amp-init-scale", 65536.0, "with --amp fp16: the gradient scaler's first scale", 0.0);
  f.add_int("amp-growth-interval", 2000,
            "with --amp fp16: clean steps in a row after which the scaler doubles the scale (it halves it on a step "
            "skipped for an inf or NaN gradient)",
            1);
  f.add_string("bucket-cap", "25",
               "with DDP: the gradient buckets' size in MB, or auto: measured on this model and group after the "
               "second step and chosen to hide the most communication behind backward (the choice goes to stderr)");
  f.add_string("checkpoint-dir", "", "write a checkpoint here after every epoch (and on Ctrl-C)");
  f.add_int("checkpoint-every", 0,
            "also write last.safetensors every this many steps within an epoch (0: only at epochs' ends), so a "
            "crash loses less: --resume latest takes the newest checkpoint, at any process count",
            0);
  f.add_int("keep-checkpoints", 2, "how many epoch checkpoints to keep, besides best.safetensors", 1);
  f.add_string("resume", "", "continue from this checkpoint, or 'latest' in --checkpoint-dir");
  f.add_string("log-dir", "", "write metrics.jsonl and TensorBoard event files here");
  f.add_int("log-every", 50, "steps between log lines (and metric records)", 1);
  f.add_string("profile", "",
               "record a step timeline (forward, backward, optimizer, each bucket's collective, data waits, copies, "
               "pipeline actions, sharded gathers) of --profile-steps into this directory: trace.rank<N>.json per "
               "rank and trace.json with every rank, for Perfetto (ui.perfetto.dev) or chrome://tracing");
  f.add_string("profile-steps", "3-5", "with --profile: the steps of this run to record, FIRST-LAST (counted from 1)");
  f.add_int("max-steps", 0, "stop after this many steps in all (0: no limit), for smoke runs", 0);
  f.add_bool("eval-only", "only evaluate the model loaded with --resume on the test set");
  f.add_string("progress", "auto",
               "rank 0's progress display: a live bar, one line every --log-every steps, or auto (a bar when stdout "
               "is a terminal; under mpirun stdout is a pseudo-terminal, so pass lines when redirecting mpirun)",
               {"auto", "bar", "lines"});
  f.add_string(
      "augment", "on",
      "random crop (padding 2 for 28x28, 4 for 32x32; --data imagefolder: see --image-crop) and horizontal flip",
      {"on", "off"});
  f.add_int("cutout", 0, "side of a Cutout square (0: none)", 0);
  f.add_bool("flip-tta", "final evaluation on each image and its mirror image, averaging the logits");
  f.add_int("synthetic-size", 10000, "training examples of --data synthetic", 1);
  return f;
}

TrainConfig config_from(const Flags& f) {
  TrainConfig c;
  c.model = f.get_string("model");
  bool known = false;
  for (const auto& m : models::model_names()) known = known || m == c.model;
  if (!known) throw FlagError("--model: unknown model '" + c.model + "' (see --help for the list)");
  c.data = f.get_string("data");
  c.data_dir = f.get_string("data-dir");
  if ((c.data == "cifar10" || c.data == "cifar100") && c.data_dir.empty())
    throw FlagError("--data " + c.data + " needs --data-dir (the folder with the binary batch files)");
  resolve_image_folder(f, c);
  c.epochs = f.get_int("epochs");
  c.batch_size = f.get_int("batch-size");
  c.lr = f.get_double("lr");
  c.momentum = f.get_double("momentum");
  if (c.momentum >= 1.0) throw FlagError("--momentum: expected a value below 1, got " + std::to_string(c.momentum));
  c.weight_decay = f.get_double("weight-decay");
  c.optimizer = f.get_string("optimizer");
  c.schedule = f.get_string("schedule");
  c.label_smoothing = f.get_double("label-smoothing");
  if (c.label_smoothing > 1.0) throw FlagError("--label-smoothing: expected a value in [0, 1]");
  c.workers = f.get_int("workers");
  c.seed = static_cast<uint64_t>(f.get_int("seed"));
  resolve_split(f, c);  // first: its clash with --data-parallel is the message to give
  c.data_parallel = resolve_data_parallel(f);
  if (!c.model_parallel.empty())
    c.device = c.model_parallel.front();
  else if (!c.pipeline.empty())
    c.device = c.pipeline.front();
  else
    c.device = c.data_parallel.empty() ? resolve_device(f.get_string("device")) : c.data_parallel.front();
  resolve_amp(f, c);
  c.shard_stage = f.get_int("shard-stage");
  if (c.shard_stage > 3)
    throw FlagError("--shard-stage: expected 1, 2 or 3 (0: DDP), got " + std::to_string(c.shard_stage));
  if (c.shard_stage > 0) {
    if (!c.data_parallel.empty() || !c.model_parallel.empty() || !c.pipeline.empty())
      throw FlagError(
          "--shard-stage shards over the processes of a launch; it does not combine with "
          "--data-parallel, --devices, --model-parallel or --pipeline");
    if (!comm::read_environment().launched)
      throw FlagError("--shard-stage " + std::to_string(c.shard_stage) +
                      " needs a launcher (mpirun, srun, or the RANK/WORLD_SIZE environment): it shards over processes");
  }
  c.threads = f.get_int("threads");
  c.deterministic = f.get_bool("deterministic");
  {
    const std::string cap = f.get_string("bucket-cap");
    char* end = nullptr;
    const double mb = cap == "auto" ? -1.0 : std::strtod(cap.c_str(), &end);
    if (cap != "auto" && (cap.empty() || *end != '\0' || !(mb > 0) || !std::isfinite(mb)))
      throw FlagError("--bucket-cap: expected a positive number of MB or auto, got '" + cap + "'");
    c.bucket_cap_mb = mb;
  }
  c.checkpoint_dir = f.get_string("checkpoint-dir");
  c.keep_checkpoints = f.get_int("keep-checkpoints");
  c.checkpoint_every = f.get_int("checkpoint-every");
  c.resume = f.get_string("resume");
  if (c.resume == "latest" && c.checkpoint_dir.empty()) throw FlagError("--resume latest needs --checkpoint-dir");
  c.log_dir = f.get_string("log-dir");
  c.log_every = f.get_int("log-every");
  c.profile_dir = f.get_string("profile");
  {
    const std::string steps = f.get_string("profile-steps");
    const size_t dash = steps.find('-');
    long long first = 0, last = 0;
    char extra = 0;
    if (dash == std::string::npos || std::sscanf(steps.c_str(), "%lld-%lld%c", &first, &last, &extra) != 2 ||
        first < 1 || last < first)
      throw FlagError("--profile-steps: expected FIRST-LAST with 1 <= FIRST <= LAST (e.g. 3-5), got '" + steps + "'");
    c.profile_first_step = first, c.profile_last_step = last;
  }
  c.progress = f.get_string("progress");
  c.max_steps = f.get_int("max-steps");
  c.eval_only = f.get_bool("eval-only");
  if (c.eval_only && c.resume.empty()) throw FlagError("--eval-only needs --resume (the weights to evaluate)");
  if (c.eval_only && c.data == "imagefolder" && c.val_dir.empty())
    throw FlagError("--eval-only with --data imagefolder needs --val-dir (the images to evaluate on)");
  c.augment = f.get_string("augment") == "on";
  c.cutout = f.get_int("cutout");
  c.flip_tta = f.get_bool("flip-tta");
  c.synthetic_size = f.get_int("synthetic-size");
  return c;
}

}  // namespace ember::train
