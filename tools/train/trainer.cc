// The epoch loop, the same for every parallel mode (each is a TrainStrategy, strategy.h). Rank 0
// alone prints, logs and writes checkpoints (with --shard-stage every rank writes its shard of
// them); evaluation is sharded (every test example counted once) and its sums all-reduced. Ctrl-C
// (SIGINT) is agreed on by all ranks at the next step, then a checkpoint holding the loader's
// position is saved; a second Ctrl-C exits at once without one.
#include "tools/train/trainer.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "autograd/functional.h"
#include "comm/kernel_agreement.h"
#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"
#include "core/kernel_select.h"
#include "core/profiler.h"
#include "cuda/api.h"
#include "models/zoo.h"
#include "nn/amp/grad_scaler.h"
#include "nn/checkpoint.h"
#include "tools/train/checkpoint_files.h"
#include "tools/train/interrupt.h"
#include "tools/train/metrics_log.h"
#include "tools/train/profile_run.h"
#include "tools/train/progress.h"
#include "tools/train/setup.h"
#include "tools/train/step_telemetry.h"
#include "tools/train/strategy.h"

namespace ember::train {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Evaluation {
  double loss = 0, accuracy = 0;
  int64_t examples = 0;
};

// Loss and accuracy over the whole test set; with several ranks each evaluates its shard. Images
// go to the target's input device (the CPU for DataParallel, which copies each chunk to its
// device), labels to its output device, where the logits are.
Evaluation evaluate(const EvalTarget& target_module, data::DataLoader& loader, data::DataLoader* flipped,
                    const std::shared_ptr<comm::ProcessGroup>& world) {
  nn::Module& model = *target_module.module;
  const Device device = target_module.output, input_device = target_module.input;
  model.eval();
  NoGradGuard no_grad;
  double loss_sum = 0, correct = 0, count = 0;
  std::vector<Tensor> mirror_logits;
  if (flipped) {
    for (data::Batch& batch : *flipped) mirror_logits.push_back(model.forward(batch.data.to(input_device, true)));
  }
  size_t index = 0;
  for (data::Batch& batch : loader) {
    Tensor logits = model.forward(batch.data.to(input_device, true));
    Tensor target = batch.target.to(device, true);
    if (flipped) logits = (logits + mirror_logits[index++]) * 0.5;
    loss_sum += cross_entropy(logits, target, {}, Reduction::Sum).item<double>();
    correct += (logits.argmax(1) == target).to(kInt64).sum().item<double>();
    count += static_cast<double>(batch.size());
  }
  // On the training device, so that a group without MPI (EMBER_BACKEND=nccl) carries it too.
  Tensor sums = tensor(std::vector<double>{loss_sum, correct, count}).to(device);
  if (world) world->all_reduce(sums)->wait();
  std::vector<double> total = sums.to_vector<double>();
  model.train();
  Evaluation e;
  e.examples = static_cast<int64_t>(total[2]);
  e.loss = total[2] > 0 ? total[0] / total[2] : 0;
  e.accuracy = total[2] > 0 ? total[1] / total[2] : 0;
  return e;
}

}  // namespace

TrainResult run_training(const TrainConfig& config) {
  auto run_start = std::chrono::steady_clock::now();
  if (config.threads > 0) cpu::set_num_threads(static_cast<int>(config.threads));
  if (config.deterministic) kernel_select::set_mode(kernel_select::Mode::Heuristic);
  const Device device = Device::parse(config.device);

  // The parallel mode (tools/train/strategy_<mode>.cc): the only part that differs between them.
  std::unique_ptr<TrainStrategy> strategy = make_strategy(config);
  const std::shared_ptr<comm::ProcessGroup> world = strategy->world();
  const int rank = strategy->rank(), world_size = strategy->world_size();
  const bool leader = rank == 0;

  DataSetup data_setup;
  try {
    data_setup = make_data(config);
  } catch (const std::exception& e) {
    throw DataError(e.what());  // a missing or malformed dataset: no restart helps (tools/launch)
  }
  // One process shuffles as RandomSampler does (a world of one pads nothing); the distributed
  // sampler also resumes an epoch at a sample count, at any world size.
  auto train_sampler =
      std::make_shared<data::DistributedSampler>(data_setup.train->size(), world ? rank : 0, world ? world_size : 1,
                                                 data::DistributedSamplerOptions().seed(config.seed));
  // On the CPU, convolutions want channels-last images; a GPU gets pinned (contiguous) batches,
  // copied without the host waiting.
  auto loader_options = [&](int64_t batch, data::SamplerPtr sampler, data::TransformPtr transform) {
    return data::DataLoaderOptions(batch)
        .sampler(std::move(sampler))
        .seed(config.seed)
        .workers(static_cast<int>(config.workers))
        .transform(std::move(transform))
        .channels_last(device.is_cpu())
        .pin_memory(device.is_cuda());
  };
  data::DataLoader train_loader(data_setup.train,
                                loader_options(config.batch_size, train_sampler, data_setup.train_transform));
  auto test_sampler = [&]() -> data::SamplerPtr {
    if (!world) return std::make_shared<data::SequentialSampler>(data_setup.test->size());
    return std::make_shared<data::DistributedSampler>(data_setup.test->size(), rank, world_size,
                                                      data::DistributedSamplerOptions().shuffle(false).unpadded(true));
  };
  const int64_t eval_batch = std::max<int64_t>(config.batch_size, 256);
  // None for an image folder without --val-dir: the run then trains without evaluating.
  std::unique_ptr<data::DataLoader> test_loader, flipped_loader;
  if (data_setup.test)
    test_loader = std::make_unique<data::DataLoader>(
        data_setup.test, loader_options(eval_batch, test_sampler(), data_setup.test_transform));
  if (data_setup.test && config.flip_tta)
    flipped_loader = std::make_unique<data::DataLoader>(
        data_setup.test, loader_options(eval_batch, test_sampler(), data_setup.test_flip_transform));

  manual_seed(config.seed);
  std::shared_ptr<nn::Module> model =
      models::make_model(config.model, data_setup.channels, data_setup.image_size, data_setup.classes);
  // All modes keep the bare model's state_dict keys (a split model holds the model's own layers,
  // as_sequential's form), and checkpoints save the bare model, so they resume in any mode.
  strategy->wrap(model);

  const int64_t steps_per_epoch = train_loader.size();
  // The schedule spans the whole run; --max-steps only stops it early, so a run resumed with
  // another --max-steps (or none) continues the same schedule.
  const int64_t total_steps = steps_per_epoch * config.epochs;
  auto optimizer = make_optimizer(config, strategy->optimized());
  auto schedule = make_schedule(config, *optimizer, total_steps);
  // --amp fp16 scales the loss so that small float16 gradients survive; bfloat16 has float32's
  // range and needs no scaler, as in PyTorch.
  std::optional<amp::GradScaler> scaler;
  if (config.amp == "fp16") {
    scaler.emplace(
        amp::GradScalerOptions().init_scale(config.amp_init_scale).growth_interval(config.amp_growth_interval));
    strategy->use_scaler(&*scaler);
  }

  TrainResult result;
  result.rank = rank;
  result.world_size = world_size;
  int64_t start_epoch = 0, step = 0;
  // The steps this run's world would have taken for the examples of the resumed epoch consumed
  // before this run (by any number of ranks).
  int64_t skipped_steps = 0;
  std::optional<int64_t> resumed_at_step;
  double best_accuracy = 0;
  if (!config.resume.empty()) {
    std::string path = config.resume == "latest" ? latest_checkpoint(config.checkpoint_dir) : config.resume;
    if (config.eval_only) {
      strategy->load_weights(path);  // onto each stage's device when split
      if (leader) std::printf("loaded weights from %s\n", path.c_str());
    } else {
      check_resume_settings(path, config, steps_per_epoch, world_size);
      nn::TrainingState state = strategy->load_checkpoint(path, *optimizer, *schedule);
      const SavedPosition saved = saved_position(state, config, world_size, steps_per_epoch);
      start_epoch = state.loader_epoch;
      train_sampler->set_epoch(start_epoch);  // the epoch resume_epoch_at applies to
      if (saved.epoch_samples > 0) train_sampler->resume_epoch_at(saved.epoch_samples);
      train_loader.load_state({start_epoch, 0});  // the loader's epoch is now the rest of it
      skipped_steps = steps_per_epoch - train_loader.size();
      step = start_epoch * steps_per_epoch + skipped_steps;
      resumed_at_step = state.step;
      // Another world size (or, with it, another batch): another number of steps per epoch (a DDP
      // run resumed by DataParallel at the same global batch keeps it).
      const bool rescaled = saved.steps_per_epoch != steps_per_epoch;
      if (rescaled) {
        // The schedule, which spans the run, is made again for this run's length and moved to
        // where this world would be.
        std::vector<double> base = schedule->base_lrs();
        for (size_t g = 0; g < base.size(); ++g) optimizer->param_groups()[g].options().set_lr(base[g]);
        schedule = make_schedule(config, *optimizer, total_steps);
        for (int64_t s = 0; s < step; ++s) schedule->step();
      }
      EMBER_CHECK(rescaled || step == state.step, "--resume ", path, ": the checkpoint is at step ", state.step,
                  " but its loader position is step ", step, " of this run");
      if (const json::Value* best = state.extra.find("best_accuracy")) best_accuracy = best->as_double();
      if (leader) {
        std::printf("resumed from %s (epoch %lld, step %lld)", path.c_str(), static_cast<long long>(start_epoch),
                    static_cast<long long>(state.step));
        if (rescaled)
          std::printf(
              ", saved by %d process%s at %lld steps per epoch: %lld examples of epoch %lld done, the rest dealt "
              "over %d; step %lld at this run's %lld steps per epoch",
              saved.world_size, saved.world_size == 1 ? "" : "es", static_cast<long long>(saved.steps_per_epoch),
              static_cast<long long>(saved.epoch_samples), static_cast<long long>(start_epoch + 1), world_size,
              static_cast<long long>(step), static_cast<long long>(steps_per_epoch));
        std::printf("\n");
      }
    }
  }

  int64_t parameters = 0;
  for (const Tensor& p : model->parameters()) parameters += p.numel();
  if (leader) {
    const std::string amp = config.amp == "off"    ? ""
                            : config.amp == "bf16" ? "; autocast to bfloat16"
                                                   : "; autocast to float16, gradient scaler";
    std::printf("train: %s (%.3fM parameters) on %s, %s; %d process%s x %d thread%s, batch %lld per process%s%s\n",
                config.model.c_str(), parameters / 1e6, data_setup.description.c_str(), strategy->where().c_str(),
                world_size, world_size > 1 ? "es" : "", cpu::num_threads(), cpu::num_threads() > 1 ? "s" : "",
                static_cast<long long>(config.batch_size), strategy->batch_note().c_str(), amp.c_str());
    std::fflush(stdout);
  }

  if (config.eval_only) {
    AutocastGuard mixed_precision = strategy->autocast();
    Evaluation e = evaluate(strategy->eval_only_target(), *test_loader, flipped_loader.get(), world);
    result.test_accuracy = e.accuracy;
    result.test_loss = e.loss;
    result.train_seconds = seconds_since(run_start);
    if (leader)
      std::printf("eval: %lld examples, loss %.4f, accuracy %.4f\n", static_cast<long long>(e.examples), e.loss,
                  e.accuracy);
    return result;
  }

  MetricsLog log(config.log_dir, leader, resumed_at_step);
  Progress progress(leader, config.log_every, config.progress);
  if (!config.checkpoint_dir.empty() && leader) std::filesystem::create_directories(config.checkpoint_dir);
  checkpoint_on_interrupt();

  auto save = [&](const std::string& name, int64_t epochs_done) {
    if (config.checkpoint_dir.empty()) return;
    nn::TrainingState state;
    state.epoch = epochs_done;
    state.step = step;
    data::LoaderState position = train_loader.state();
    int64_t epoch_samples = 0;  // consumed by all ranks in the epoch under way
    if (position.batches >= train_loader.size()) {
      position = {position.epoch + 1, 0};  // a finished epoch
    } else {
      epoch_samples = position.batches * config.batch_size * world_size;
      if (train_sampler->resumed_at() > 0 && train_sampler->epoch() == position.epoch)
        epoch_samples += train_sampler->resumed_at();
    }
    state.loader_epoch = position.epoch;
    state.loader_batches = position.batches;
    state.extra.set("epoch_samples", json::Value::integer(epoch_samples));
    state.extra.set("world_size", json::Value::integer(world_size));
    state.extra.set("best_accuracy", json::Value::number(best_accuracy));
    state.extra.set("run", run_settings(config, steps_per_epoch));
    state.extra.set("amp", json::Value::string(config.amp));
    strategy->save_checkpoint(checkpoint_path(config.checkpoint_dir, name, config.shard_stage > 0), *optimizer,
                              *schedule, state);
  };

  const LossFn loss_fn = [&](const Tensor& logits, const Tensor& target) {
    return cross_entropy(logits, target, {}, Reduction::Mean, -100, config.label_smoothing);
  };
  strategy->trained().train();
  bool stop = config.max_steps > 0 && step >= config.max_steps;  // resumed at or past --max-steps
  bool interrupted = false;                                      // by Ctrl-C on any rank
  if (stop && leader)
    std::printf("nothing to train: the checkpoint is at step %lld, --max-steps is %lld\n", static_cast<long long>(step),
                static_cast<long long>(config.max_steps));
  ProfileRun profile(config, world, device, rank);
  StepTelemetry telemetry(world_size);
  std::vector<Device> memory_devices = strategy->memory_devices();
  memory_devices.push_back(device);
  int64_t run_step = 0;  // steps this run has taken (--profile-steps counts these)
  for (int64_t epoch = start_epoch; epoch < config.epochs && !stop; ++epoch) {
    auto epoch_start = std::chrono::steady_clock::now();
    if (train_loader.state().epoch != epoch || train_loader.state().batches == 0) train_loader.set_epoch(epoch);
    int64_t done_in_epoch = train_loader.state().batches + (epoch == start_epoch ? skipped_steps : 0);
    progress.start_epoch(epoch + 1, config.epochs, steps_per_epoch);
    double loss_sum = 0, correct = 0, seen = 0;
    auto window_start = std::chrono::steady_clock::now();
    int64_t window_images = 0;
    auto fetch_start = std::chrono::steady_clock::now();
    for (data::Batch& batch : train_loader) {
      const auto step_start = std::chrono::steady_clock::now();
      telemetry.data_waited(std::chrono::duration<double>(step_start - fetch_start).count());
      profile.before_step(++run_step);
      StepResult r;
      {
        const profiler::Range step_range("step", profiler::active() ? "step " + std::to_string(step + 1) : "");
        optimizer->zero_grad();
        r = strategy->train_step(batch, loss_fn);
        const profiler::Range optimizer_range("optimizer", "optimizer step");
        const profiler::DeviceRange optimizer_on_device(device, "optimizer", "optimizer step");
        if (scaler) {
          scaler->step(*optimizer);  // skipped when a gradient overflowed float16
          scaler->update();
          progress.set_loss_scale(scaler->get_scale());
        } else {
          optimizer->step();
        }
        schedule->step();
      }
      ++step;
      ++done_in_epoch;
      double loss_value = r.loss.item<double>();
      loss_sum += loss_value * static_cast<double>(batch.size());
      correct += r.correct.item<double>();
      if (device.is_cuda()) {
        // With DataParallel or a split model the highest peak among its devices.
        int64_t peak = cuda::memory_stats(device.index).peak_allocated_bytes;
        for (const Device& d : strategy->memory_devices())
          if (d.is_cuda()) peak = std::max(peak, cuda::memory_stats(d.index).peak_allocated_bytes);
        progress.set_device_peak(peak);
      }
      seen += static_cast<double>(batch.size());
      window_images += batch.size();
      progress.step(done_in_epoch, loss_value, batch.size() * world_size);
      telemetry.step_done(seconds_since(step_start), strategy->exposed_comm_seconds());
      if (step % config.log_every == 0) {
        double rate = window_images * world_size / std::max(seconds_since(window_start), 1e-9);
        std::map<std::string, double> values = {
            {"loss", loss_value}, {"lr", schedule->get_last_lr()[0]}, {"images_per_second", rate}};
        if (scaler) values["loss_scale"] = scaler->get_scale();
        values["grad_norm"] =
            gradient_norm(optimizer->parameters(), config.shard_stage > 0 ? world.get() : nullptr, device);
        telemetry.take_window(values);
        log.write("step", step, values);
        window_start = std::chrono::steady_clock::now();
        window_images = 0;
      }
      // What the ranks must do alike, agreed in one all-reduce per step: stop at this step when
      // any rank got Ctrl-C (each then saves and exits as interrupted, none evaluates), and run
      // rank 0's kernels, which the checkpoint records, from the next step when any rank met a
      // new problem.
      // The same sum carries each rank's busy time and peak memory (step_telemetry.h).
      interrupted = interrupt_requested();
      std::vector<double> shared = telemetry.shared_slots(rank, memory_devices);
      shared.push_back(interrupted ? 1.0 : 0.0);
      shared.push_back(comm::kernel_decisions_changed() ? 1.0 : 0.0);
      if (world) {
        Tensor summed = tensor(shared).to(device);
        world->all_reduce(summed)->wait();
        shared = summed.to(kCPU).to_vector<double>();
      }
      interrupted = shared[shared.size() - 2] > 0;
      if (world && shared.back() > 0) comm::share_kernel_decisions(*world, device);
      for (int slow : telemetry.observe_shared(shared)) {
        if (!leader) continue;
        std::printf(
            "train: rank %d is slow: its steps took %.3f s of work against the ranks' median %.3f s, 10 steps in "
            "a row (over 1.2x)\n",
            slow, telemetry.busy_seconds_of(slow), telemetry.median_busy_seconds());
        log.write("slow_rank", step,
                  {{"rank", slow},
                   {"busy_seconds", telemetry.busy_seconds_of(slow)},
                   {"median_busy_seconds", telemetry.median_busy_seconds()}});
      }
      profile.after_step(run_step);
      if (interrupted || (config.max_steps > 0 && step >= config.max_steps)) {
        stop = true;
        break;
      }
      // Within the epoch only: its end writes epoch-N.
      if (config.checkpoint_every > 0 && step % config.checkpoint_every == 0 && done_in_epoch < steps_per_epoch)
        save("last", epoch);
      fetch_start = std::chrono::steady_clock::now();
    }
    progress.end_epoch();
    if (interrupted) {
      save("interrupted", epoch);
      // No rank leaves before rank 0's checkpoint is written: a launcher ends the whole job when
      // a rank exits with a non-zero status (130 here).
      if (world) world->barrier()->wait();
      result.interrupted = true;
      if (leader)
        std::printf("interrupted at step %lld; checkpoint saved (resume with --resume latest)\n",
                    static_cast<long long>(step));
      break;
    }
    double train_time = seconds_since(epoch_start);
    // Mirror-image evaluation doubles the cost, so it runs only for the result the run reports.
    const bool final_evaluation = stop || epoch + 1 == config.epochs;
    Evaluation test;
    if (test_loader) {
      AutocastGuard mixed_precision = strategy->autocast();
      test = evaluate(strategy->evaluation_target(), *test_loader, final_evaluation ? flipped_loader.get() : nullptr,
                      world);
    }
    Tensor train_sums = tensor(std::vector<double>{loss_sum, correct, seen}).to(device);
    if (world) world->all_reduce(train_sums)->wait();
    std::vector<double> ts = train_sums.to_vector<double>();
    double train_loss = ts[2] > 0 ? ts[0] / ts[2] : 0, train_acc = ts[2] > 0 ? ts[1] / ts[2] : 0;
    result.epochs = epoch + 1;
    result.evaluated = test_loader != nullptr;
    result.test_accuracy = test.accuracy;
    result.test_loss = test.loss;
    best_accuracy = std::max(best_accuracy, test.accuracy);
    // An epoch cut short by --max-steps is reported as a "stop", not as an epoch: a resumed run
    // reports the whole epoch later, and epoch N must be logged once.
    const bool partial = done_in_epoch < steps_per_epoch;
    if (leader) {
      const std::string label =
          partial ? " (stopped at step " + std::to_string(done_in_epoch) + "/" + std::to_string(steps_per_epoch) + ")"
                  : "";
      char test_text[64] = "no evaluation (no --val-dir)";
      if (test_loader) std::snprintf(test_text, sizeof test_text, "test loss %.4f acc %.4f", test.loss, test.accuracy);
      std::printf("epoch %lld/%lld%s: train loss %.4f acc %.4f | %s | %.1f s (%.0f img/s) + eval %.1f s\n",
                  static_cast<long long>(epoch + 1), static_cast<long long>(config.epochs), label.c_str(), train_loss,
                  train_acc, test_text, train_time, ts[2] / std::max(train_time, 1e-9),
                  seconds_since(epoch_start) - train_time);
      std::fflush(stdout);
      std::map<std::string, double> values = {{"train_loss", train_loss},
                                              {"train_accuracy", train_acc},
                                              {"seconds", seconds_since(epoch_start)},
                                              {"epoch", static_cast<double>(epoch + 1)}};
      if (test_loader) {
        values["test_loss"] = test.loss;
        values["test_accuracy"] = test.accuracy;
      }
      log.write(partial ? "stop" : "epoch", step, values);
    }
    if (!stop || config.max_steps > 0) {
      save("epoch-" + std::to_string(epoch + 1), epoch + 1);
      if (test_loader && test.accuracy >= best_accuracy) save("best", epoch + 1);
      if (leader && !config.checkpoint_dir.empty())
        prune_checkpoints(config.checkpoint_dir, epoch + 1, config.keep_checkpoints);
    }
  }
  profile.finish();  // a run that ended inside --profile-steps
  result.steps = step;
  result.train_seconds = seconds_since(run_start);
  return result;
}

}  // namespace ember::train
