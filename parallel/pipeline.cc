// Pipeline: devices on their own threads and streams, micro-batches passed between neighbouring
// stages (stage k on device k % p, so with virtual stages the last device sends to the first).
//
// Each micro-batch's part of each stage is a graph of its own: its input is a leaf on the stage's
// device, and the stage's backward of micro-batch i is `backward(output_i, grad_i)`, whose input
// gradient goes to the stage before. So the schedule, not autograd, decides what runs when, and
// a device's thread runs exactly its list of actions (pipeline_schedule.cc).
//
// Streams. Device thread d queues its kernels, whichever of its stages runs, on a stream of its
// own (S_d), which waits at the start of a run for the caller's current stream on its device (the
// optimizer's step), and the caller's stream waits for every S_d at the end. A tensor passed on
// is produced on the sender's stream: the receiver copies it to its device on that stream (the
// copy reads only memory of the
// sender's stream, and writes memory of the receiver's), or, on the same device, makes its
// stream wait for the sender's and records the tensor as used on its stream (record_stream), so
// the sender's later work cannot reuse the memory under the receiver's reads. A peer copy is
// ordered after the work queued on the destination's stream (Ember's cross-device copy does
// that for any copy): on real GPUs it couples the two neighbours' streams at each transfer.
#include "parallel/pipeline.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/node.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/profiler.h"
#include "core/random.h"
#include "core/runtime.h"
#include "nn/modules/batchnorm.h"
#include "parallel/deferred_batch_norm.h"
#include "parallel/replica_threads.h"

namespace ember::parallel {

namespace {

using Clock = std::chrono::steady_clock;

// A tensor handed to a neighbour and the stream that produced it (undefined on the CPU).
struct Message {
  Tensor tensor;
  Stream stream;
};

// A stage's incoming messages of one direction, by micro-batch. Unbounded: a send never waits.
class Inbox {
 public:
  void put(int64_t micro_batch, Message message) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      messages_[micro_batch] = std::move(message);
    }
    cv_.notify_all();
  }
  Message take(int64_t micro_batch, const char* what) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !aborted_.empty() || messages_.count(micro_batch) != 0; });
    EMBER_CHECK(aborted_.empty(), "Pipeline: stopped waiting for micro-batch ", micro_batch, "'s ", what, ": ",
                aborted_);
    Message m = std::move(messages_[micro_batch]);
    messages_.erase(micro_batch);
    return m;
  }
  void abort(const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (aborted_.empty()) aborted_ = reason;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<int64_t, Message> messages_;
  std::string aborted_;
};

// Mixes a run's seed with (stage, micro-batch): the generator a micro-batch's stage forward
// draws from, again when it is recomputed.
uint64_t mix_seed(uint64_t base, int64_t stage, int64_t micro_batch) {
  uint64_t z = base + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(stage * 1000003 + micro_batch + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The k-th pipeline stream of `device`, made once and never destroyed. The caching allocator keeps
// the streams a block was allocated or recorded on by handle, so a stage stream must outlive every
// tensor used on it, the caller's inputs and the returned outputs included: a stream destroyed
// with its Pipeline left frees of those tensors to record events on a dead stream (a hang seen
// when a bench's input outlived several pipelines). PyTorch keeps a stream pool for the same
// reason. Pipelines used at once share the pool's streams, which only orders their work more.
Stream pooled_stream(Device device, size_t k) {
  static std::mutex mutex;
  // Leaked on purpose: destroying the streams at exit could outlast the device runtime.
  static auto* pool = new std::map<std::pair<int, int>, std::vector<Stream>>();
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<Stream>& streams = (*pool)[{static_cast<int>(device.type), device.index}];
  while (streams.size() <= k) streams.push_back(new_stream(device));
  return streams[k];
}

// A run's seed, one draw from the caller's generator: manual_seed makes pipelined dropout
// reproducible whatever the order in which the stage threads run.
uint64_t run_seed() {
  const PhiloxState state = current_generator().reserve(1);
  return state.seed ^ (state.offset * 0x9e3779b97f4a7c15ull);
}

}  // namespace

// What one run (a forward, a train_step, or a forward and its backward) keeps.
struct Pipeline::Executor {
  enum class Mode { kEvaluate, kAutograd, kTrain };

  struct Record {   // one micro-batch at one stage
    Tensor input;   // a leaf on the stage's device
    Tensor output;  // with its graph (not kept when recomputing)
    Tensor loss;    // last stage of a train_step: the weighted loss, with its graph
  };

  struct Run {
    Mode mode = Mode::kEvaluate;
    int64_t micro_batches = 0;
    std::vector<Tensor> chunks, targets;
    std::vector<double> weights;  // each micro-batch's share of the loss
    bool input_requires_grad = false;
    uint64_t seed = 0;
    std::vector<std::vector<Record>> records;  // [stage][micro-batch]
    std::vector<Inbox> forward_inbox, backward_inbox;
    std::vector<DeferredStats> stats;
    std::vector<Tensor> outputs, losses, metrics, input_grads, output_grads;
    std::vector<std::vector<PipelineEvent>> events;  // per device
    Clock::time_point start;
    const ReplicaLossFn* loss_fn = nullptr;
    const ReplicaLossFn* metric = nullptr;
    bool retain_graph = false;
    std::map<int, Stream> caller_streams;  // by CUDA device index
    Device input_device;
    int64_t placement = 0;  // Pipeline::placements_ when the run began

    Run(size_t stages, size_t devices)
        : records(stages), forward_inbox(stages), backward_inbox(stages), stats(stages), events(devices) {}
    // The first failure is the cause; the stages it leaves waiting fail after it (aborted).
    std::mutex failure_mutex;
    std::string cause;

    void fail(int64_t stage, Device device, const char* what) {
      const std::string reason = detail::concat("stage ", stage, " on ", device, " failed");
      {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!cause.empty()) return;
        cause = detail::concat("Pipeline: ", reason, ": ", what);
      }
      for (Inbox& box : forward_inbox) box.abort(reason);
      for (Inbox& box : backward_inbox) box.abort(reason);
    }
  };

  Pipeline& pipe;
  ReplicaThreads threads;
  std::vector<Stream> streams;  // per device; undefined on the CPU
  std::vector<PipelineEvent> last_events;

  int64_t placements() const { return pipe.placements_; }

  explicit Executor(Pipeline& p) : pipe(p), threads(p.devices_, "Pipeline", ReplicaThreads::StageThreads{}) {
    std::map<std::pair<int, int>, size_t> seen;  // a device listed twice gets two streams
    for (const Device& d : p.devices_) streams.push_back(pooled_stream(d, seen[{static_cast<int>(d.type), d.index}]++));
  }

  // Runs every device's `actions(device)` on its thread; the caller's streams order around it.
  void execute(Run& run, const std::function<std::vector<PipelineAction>(int64_t)>& actions) {
    const int64_t p = pipe.num_devices();
    run.start = Clock::now();
    for (std::vector<PipelineEvent>& e : run.events) e.clear();
    run.caller_streams.clear();  // a backward may run on other streams than its forward
    for (const Device& d : pipe.devices_)
      if (d.is_cuda() && run.caller_streams.count(d.index) == 0) run.caller_streams[d.index] = current_stream(d);
    if (run.input_device.is_cuda() && run.caller_streams.count(run.input_device.index) == 0)
      run.caller_streams[run.input_device.index] = current_stream(run.input_device);
    run.cause.clear();
    try {
      threads.run(static_cast<size_t>(p), {},
                  [&](size_t k) { device_main(run, static_cast<int64_t>(k), actions(static_cast<int64_t>(k))); });
    } catch (const Error&) {
      // A failed run's kernels may still be reading tensors the caller frees now (the targets,
      // on its stream): its later work, reuse of that memory included, waits for them too.
      for (const Stream& stream : streams) wait_for_stream(stream);
      // The stage that failed first, not one that stopped waiting for it.
      if (!run.cause.empty()) throw Error(run.cause);
      throw;
    }
    // The caller's later work (the optimizer step, reading the loss) after every stage's.
    for (const Stream& stream : streams) wait_for_stream(stream);
    last_events.clear();
    for (auto& e : run.events) last_events.insert(last_events.end(), e.begin(), e.end());
  }

  void device_main(Run& run, int64_t d, const std::vector<PipelineAction>& actions) {
    const Device device = pipe.devices_[d];
    if (profiler::active())
      profiler::set_thread_name("pipeline device " + std::to_string(d) + " (" + device.str() + ")");
    if (streams[d].defined()) {
      set_current_stream(streams[d]);
      // After the caller's queued work on this device (this thread's current stream is S_d).
      wait_for_stream(run.caller_streams.at(device.index));
    }
    for (const PipelineAction& a : actions) {
      const int64_t s = a.chunk * pipe.num_devices() + d;
      PipelineEvent event{s, d, a.micro_batch, a.backward, 0, 0};
      // Busy from when the neighbour's message is in (waiting for it is the bubble).
      const Clock::time_point queued = Clock::now();
      Clock::time_point busy_from = queued;
      std::optional<profiler::DeviceRange> on_device;
      const std::string what = profiler::active()
                                   ? "stage " + std::to_string(s) + (a.backward ? " backward" : " forward") +
                                         " micro-batch " + std::to_string(a.micro_batch)
                                   : std::string();
      auto started = [&] {
        busy_from = Clock::now();
        event.start_s = seconds_since(run.start);
        if (!what.empty()) on_device.emplace(device, "pipeline", what);
      };
      try {
        if (a.backward)
          backward_step(run, s, a.micro_batch, started);
        else
          forward_step(run, s, a.micro_batch, started);
      } catch (const std::exception& e) {
        run.fail(s, device, e.what());
        throw;
      }
      event.end_s = seconds_since(run.start);
      on_device.reset();
      if (!what.empty()) {
        if (busy_from > queued) profiler::complete("pipeline", "wait for " + what, queued, busy_from);
        profiler::complete("pipeline", what, busy_from, Clock::now());
      }
      run.events[d].push_back(event);
    }
  }

  static double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  // The stream stage s runs on: its device thread's.
  const Stream& stream_of(int64_t s) const { return streams[static_cast<size_t>(s % pipe.num_devices())]; }

  // `m.tensor` on stage s's device, ordered after its production (see the file comment).
  Tensor receive(const Message& m, int64_t s) {
    const Device to = pipe.stage_device(s);
    const Device from = m.tensor.device();
    if (from == to) {
      if (to.is_cuda() && m.stream.defined() && m.stream != stream_of(s)) {
        wait_for_stream(m.stream);
        record_stream(m.tensor, stream_of(s));
      }
      return m.tensor;
    }
    if (from.is_cuda()) {
      set_current_stream(m.stream);  // the copy runs on the sender's stream
      Tensor moved = m.tensor.to(to);
      set_current_stream(stream_of(s));
      return moved;
    }
    return m.tensor.to(to);  // from host memory the sender finished writing
  }

  Tensor run_stage(int64_t s, const Tensor& input) { return pipe.stages_[static_cast<size_t>(s)]->forward(input); }

  // The loss of micro-batch i on the last stage, weighted by its share of the batch.
  Tensor weighted_loss(Run& run, const Tensor& output, int64_t i) {
    Tensor loss = (*run.loss_fn)(output, run.targets[i]);
    EMBER_CHECK(loss.defined() && loss.numel() == 1,
                "Pipeline::train_step: the loss function must return a scalar, "
                "got ",
                loss.defined() ? shape_str(loss.sizes()) : std::string("nothing"), " for micro-batch ", i);
    return run.weights[i] == 1.0 ? loss.reshape({}) : loss.reshape({}) * run.weights[i];
  }

  void forward_step(Run& run, int64_t s, int64_t i, const std::function<void()>& started) {
    const int64_t last = pipe.num_stages() - 1;
    Tensor x;
    if (s == 0) {
      const Tensor& chunk = run.chunks[i];
      Message m{chunk, chunk.device().is_cuda() ? run.caller_streams.at(chunk.device().index) : Stream()};
      x = receive(m, 0);
    } else {
      x = receive(run.forward_inbox[s].take(i, "input"), s);
    }
    started();
    const bool keep = run.mode != Mode::kEvaluate;
    const bool leaf_grad = keep && (s > 0 || run.input_requires_grad) && is_floating(x.dtype());
    Tensor in = x.detach();
    if (leaf_grad) in.requires_grad_(true);
    Generator generator(mix_seed(run.seed, s, i));
    GeneratorGuard use_generator(&generator);
    // Without deferral each micro-batch's forward updates the running statistics itself.
    run.stats[s].micro_batch = i;
    std::optional<nn::RunningStatsScope> deferred;
    if (pipe.options_.deferred_batch_norm) deferred.emplace(&run.stats[s]);
    Tensor out;
    {
      // Recomputation: the first forward records no graph (the backward reruns it).
      EnableGradGuard grad(GradMode::is_enabled() && !(keep && pipe.options_.checkpoint));
      out = run_stage(s, in);
      if (s == last && run.mode == Mode::kTrain) {
        Tensor loss = weighted_loss(run, out, i);
        run.losses[i] = loss.detach();
        if (!pipe.options_.checkpoint) run.records[s][i].loss = loss;
        if (run.metric != nullptr && *run.metric) {
          NoGradGuard no_grad;
          run.metrics[i] = (*run.metric)(out.detach(), run.targets[i]);
        }
      }
    }
    if (keep) {
      Record& r = run.records[s][i];
      r.input = in;
      if (!pipe.options_.checkpoint) r.output = out;
    }
    if (s == last) {
      if (run.mode != Mode::kTrain) run.outputs[i] = out;
    } else {
      run.forward_inbox[s + 1].put(i, {out.detach(), stream_of(s)});
    }
  }

  void backward_step(Run& run, int64_t s, int64_t i, const std::function<void()>& started) {
    const int64_t last = pipe.num_stages() - 1;
    Record& r = run.records[s][i];
    EMBER_CHECK(r.input.defined(), "Pipeline: micro-batch ", i, "'s backward on stage ", s,
                " found nothing saved (a second backward without retain_graph?)");
    Tensor grad;
    if (s < last)
      grad = receive(run.backward_inbox[s].take(i, "gradient"), s);
    else if (run.mode == Mode::kAutograd)
      grad = run.output_grads[i];
    started();
    Tensor root;
    if (pipe.options_.checkpoint) {
      Generator generator(mix_seed(run.seed, s, i));
      GeneratorGuard use_generator(&generator);
      nn::RunningStatsScope skip(nullptr);  // the batch was counted by the first forward
      EnableGradGuard grad(true);
      Tensor out = run_stage(s, r.input);
      root = (s == last && run.mode == Mode::kTrain) ? weighted_loss(run, out, i) : out;
    } else {
      root = (s == last && run.mode == Mode::kTrain) ? r.loss : r.output;
    }
    if (root.requires_grad()) {
      if (grad.defined())
        autograd::backward({root}, {grad}, run.retain_graph);
      else
        autograd::backward({root}, {}, run.retain_graph);
    }
    Tensor input_grad = r.input.grad();
    if (r.input.requires_grad() && !input_grad.defined()) input_grad = zeros_like(r.input);
    if (run.retain_graph) r.input.mutable_grad() = Tensor();  // the next pass starts from zero
    if (s > 0) {
      run.backward_inbox[s - 1].put(i, {input_grad.defined() ? input_grad : zeros_like(r.input), stream_of(s)});
    } else if (run.input_requires_grad) {
      run.input_grads[i] = input_grad;
    }
    if (!run.retain_graph) r = Record();
  }
};

namespace {

// The node a GPipe forward's outputs hang from: its backward runs every stage's backward of
// every micro-batch on the stage threads.
class PipelineBackward final : public autograd::Node {
 public:
  PipelineBackward(Pipeline::Executor& executor, std::shared_ptr<Pipeline::Executor::Run> run, int64_t dim)
      : executor_(executor), run_(std::move(run)), dim_(dim) {}
  std::string name() const override { return "PipelineBackward"; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const std::optional<autograd::PassInfo> pass = autograd::current_pass();
    EMBER_CHECK(pass.has_value() && pass->accumulate,
                "Pipeline: autograd::grad() cannot differentiate through a "
                "Pipeline (its stages' backward accumulates into the parameters' .grad); call backward()");
    EMBER_CHECK(run_ != nullptr,
                "Pipeline: a second backward through the same forward; pass retain_graph to the "
                "first");
    Pipeline::Executor::Run& run = *run_;
    EMBER_CHECK(run.placement == executor_.placements(),
                "Pipeline: the stages were placed anew (Schedule::kAuto chose at a train_step) between this "
                "forward and its backward; run the backward first");
    run.retain_graph = pass->retain_graph;
    run.output_grads = std::move(grads);
    const int64_t p = executor_.pipe.num_devices(), m = run.micro_batches, v = executor_.pipe.virtual_stages();
    executor_.execute(run, [&](int64_t d) {
      std::vector<PipelineAction> all = schedule_actions(Schedule::kGPipe, d, p, m, v), backwards;
      for (const PipelineAction& a : all)
        if (a.backward) backwards.push_back(a);
      return backwards;
    });
    std::vector<Tensor> input_grads(next_edges().size());
    if (!input_grads.empty() && next_edges()[0].valid()) {
      std::vector<Tensor> parts;
      for (const Tensor& g : run.input_grads) parts.push_back(g.to(run.input_device));
      input_grads[0] = parts.size() == 1 ? parts[0] : cat(parts, dim_);
    }
    run.output_grads.clear();
    if (!pass->retain_graph) run_.reset();
    return input_grads;
  }

  void release_saved() override { run_.reset(); }

 private:
  Pipeline::Executor& executor_;
  std::shared_ptr<Pipeline::Executor::Run> run_;
  int64_t dim_;
};

}  // namespace

void Pipeline::start_executor() { executor_ = std::make_shared<Executor>(*this); }

Pipeline::~Pipeline() = default;

std::vector<PipelineEvent> Pipeline::last_events() const { return executor_->last_events; }

double Pipeline::last_step_seconds() const {
  double first = 0, last = 0;
  for (size_t k = 0; k < executor_->last_events.size(); ++k) {
    const PipelineEvent& e = executor_->last_events[k];
    first = k == 0 ? e.start_s : std::min(first, e.start_s);
    last = std::max(last, e.end_s);
  }
  return last - first;
}

namespace {

void check_input(const Tensor& input, int64_t dim, const char* op) {
  EMBER_CHECK(input.defined(), op, ": the input is undefined");
  EMBER_CHECK(dim < input.dim(), op, ": cannot split along dim ", dim, " an input of shape ", shape_str(input.sizes()));
  EMBER_CHECK(input.size(dim) > 0, op, ": the input is empty along dim ", dim, " (shape ", shape_str(input.sizes()),
              ")");
}

}  // namespace

Tensor Pipeline::forward(const Tensor& input) {
  check_input(input, options_.dim, "Pipeline::forward");
  const std::vector<int64_t> sizes = balanced_split(input.size(options_.dim), chunks_);
  bool any_grad = input.requires_grad();
  for (const Tensor& p : parameters()) any_grad = any_grad || p.requires_grad();
  const bool autograd = GradMode::is_enabled() && any_grad;
  auto run = std::make_shared<Executor::Run>(stages_.size(), devices_.size());
  run->mode = autograd ? Executor::Mode::kAutograd : Executor::Mode::kEvaluate;
  run->micro_batches = static_cast<int64_t>(sizes.size());
  run->placement = placements_;
  run->chunks = input.split_with_sizes(sizes, options_.dim);
  run->input_device = input.device();
  run->input_requires_grad = autograd && input.requires_grad();
  run->seed = run_seed();
  for (auto& records : run->records) records.resize(sizes.size());
  run->outputs.resize(sizes.size());
  run->input_grads.resize(sizes.size());
  const int64_t p = num_devices(), m = run->micro_batches, v = virtual_stages_;
  executor_->execute(*run, [&](int64_t d) {
    std::vector<PipelineAction> forwards;
    for (const PipelineAction& a : schedule_actions(Schedule::kGPipe, d, p, m, v))
      if (!a.backward) forwards.push_back(a);
    return forwards;
  });
  if (options_.deferred_batch_norm) {
    for (auto& stats : run->stats) stats.apply();
  }
  std::vector<Tensor> outputs = std::move(run->outputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    EMBER_CHECK(outputs[i].defined() && outputs[i].dim() > options_.dim, "Pipeline::forward: the last stage returned ",
                outputs[i].defined() ? shape_str(outputs[i].sizes()) : std::string("nothing"), " for micro-batch ", i,
                ", which cannot be concatenated along dim ", options_.dim, " (use train_step for scalar losses)");
  }
  if (autograd) {
    auto node = std::make_shared<PipelineBackward>(*executor_, run, options_.dim);
    autograd::connect(node, {run->input_requires_grad ? &input : nullptr});
    std::vector<Tensor> detached;
    for (const Tensor& o : outputs) detached.push_back(o.detach());
    outputs = autograd::attach(node, std::move(detached));
  }
  return outputs.size() == 1 ? outputs[0] : cat(outputs, options_.dim);
}

PipelineStep Pipeline::train_step(const Tensor& input, const Tensor& target, const ReplicaLossFn& loss_fn,
                                  LossReduction reduction, const ReplicaLossFn& metric) {
  check_input(input, options_.dim, "Pipeline::train_step");
  EMBER_CHECK(loss_fn != nullptr, "Pipeline::train_step: no loss function given");
  EMBER_CHECK(GradMode::is_enabled(),
              "Pipeline::train_step: gradients are disabled (NoGradGuard); train_step "
              "computes gradients (use forward for evaluation)");
  EMBER_CHECK(target.defined() && target.dim() > options_.dim && target.size(options_.dim) == input.size(options_.dim),
              "Pipeline::train_step: the target must split like the input along dim ", options_.dim, ": input ",
              shape_str(input.sizes()), ", target ", target.defined() ? shape_str(target.sizes()) : "undefined");
  if (schedule_ == Schedule::kAuto) choose_schedule(input);
  const std::vector<int64_t> sizes = balanced_split(input.size(options_.dim), chunks_);
  auto run = std::make_unique<Executor::Run>(stages_.size(), devices_.size());
  run->mode = Executor::Mode::kTrain;
  run->micro_batches = static_cast<int64_t>(sizes.size());
  run->chunks = input.split_with_sizes(sizes, options_.dim);
  run->input_device = input.device();
  const Tensor last_target = target.to(devices_.back());
  run->targets = last_target.split_with_sizes(sizes, options_.dim);
  const int64_t total = input.size(options_.dim);
  for (int64_t n : sizes)
    run->weights.push_back(reduction == LossReduction::kMean ? static_cast<double>(n) / static_cast<double>(total)
                                                             : 1.0);
  run->loss_fn = &loss_fn;
  run->metric = &metric;
  run->seed = run_seed();
  for (auto& records : run->records) records.resize(sizes.size());
  run->losses.resize(sizes.size());
  run->metrics.resize(sizes.size());
  const int64_t p = num_devices(), m = run->micro_batches, v = virtual_stages_;
  const Schedule schedule = schedule_;
  if (checked_micro_batches_.insert(m).second) {
    // Unit costs are enough: whether lists wait on each other does not depend on the times.
    simulate_schedule(per_device_actions(schedule, p, m, v), std::vector<StageCost>(stages_.size(), {1, 1, 0, 0}));
  }
  executor_->execute(*run, [&](int64_t d) { return schedule_actions(schedule, d, p, m, v); });
  if (plan_ && plan_->measured_step_s == 0) report_plan();
  if (options_.deferred_batch_norm) {
    for (auto& stats : run->stats) stats.apply();
  }
  PipelineStep step;
  NoGradGuard no_grad;
  for (const Tensor& l : run->losses) step.loss = step.loss.defined() ? step.loss + l : l;
  if (metric) {
    for (const Tensor& v : run->metrics)
      if (v.defined()) step.metric = step.metric.defined() ? step.metric + v : v;
  }
  return step;
}

}  // namespace ember::parallel
