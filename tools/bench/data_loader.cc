// Loader throughput: images/s a DataLoader delivers to a consumer that does nothing else, for
// Fashion-MNIST (real files) and a synthetic CIFAR-shaped dataset, with the training
// augmentations, at 0 (inline), 1 and 2 workers. Median of 3 epochs after a warm-up epoch. Also
// images per CPU-second of the whole process, which stays meaningful on a busy machine.
//   bazel run --config=bench //tools/bench:data_loader [-- --epochs-images=N]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu/thread_pool.h"
#include "core/factory.h"
#include "data/data.h"

using namespace ember::data;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double process_cpu_seconds() {
  timespec now;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

struct Rates {
  double per_second;      // images per wall-clock second
  double per_cpu_second;  // images per CPU-second of all the process's threads
};

// Median over `repeats` full epochs after a warm-up epoch.
Rates loader_rates(const DatasetPtr& dataset, const TransformPtr& transform, int workers, int repeats = 3) {
  DataLoader loader(dataset, DataLoaderOptions(128).shuffle(true).seed(1).workers(workers).transform(transform));
  std::vector<double> wall, cpu;
  for (int epoch = 0; epoch <= repeats; ++epoch) {
    auto start = std::chrono::steady_clock::now();
    double cpu_start = process_cpu_seconds();
    int64_t images = 0;
    for (Batch& batch : loader) images += batch.size();
    if (epoch == 0) continue;
    wall.push_back(static_cast<double>(images) / seconds_since(start));
    cpu.push_back(static_cast<double>(images) / (process_cpu_seconds() - cpu_start));
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

// CPU nanoseconds per image of one transform applied to every example, dataset get() included
// (single thread, so process CPU time is this thread's).
double transform_ns_per_image(const Dataset& dataset, const Transform& transform, int64_t images) {
  Example first = dataset.get(0);
  TensorSpec in = spec_of(first.data);
  std::vector<uint8_t> out(transform.output_spec(in).nbytes());
  double start = process_cpu_seconds();
  for (int64_t i = 0; i < images; ++i) {
    Example e = dataset.get(i % dataset.size());
    ExampleRandom random(1, 0, i);
    transform.apply(e.data.data_ptr(), in, out.data(), random);
  }
  return (process_cpu_seconds() - start) * 1e9 / static_cast<double>(images);
}

void report(const char* name, const DatasetPtr& dataset, const TransformPtr& transform) {
  std::printf("%s (%lld examples)\n", name, static_cast<long long>(dataset->size()));
  for (int workers : {0, 1, 2}) {
    Rates rates = loader_rates(dataset, transform, workers);
    std::printf("  workers=%d  %10.0f images/s  %10.0f images/CPU-s\n", workers, rates.per_second,
                rates.per_cpu_second);
  }
}

}  // namespace

int main() {
  // The loader's own threads are what is measured; keep Ember's compute pool out of the way.
  ember::cpu::set_num_threads(1);

  auto start = std::chrono::steady_clock::now();
  auto fashion = std::make_shared<FashionMNIST>();
  std::printf("FashionMNIST train: read + gunzip + parse in %.2f s\n\n", seconds_since(start));

  auto fashion_augment =
      std::make_shared<Compose>(RandomCrop(28, 2), RandomHorizontalFlip(), ToFloat(), Normalize({0.286f}, {0.353f}));
  report("FashionMNIST, batch 128, RandomCrop(28, 2) + flip + ToFloat + Normalize", fashion, fashion_augment);
  report("FashionMNIST, batch 128, ToFloat only", fashion, std::make_shared<ToFloat>());

  auto cifar_shaped = std::make_shared<SyntheticDataset>(50000, ember::Shape{3, 32, 32}, 10, 1);
  auto in_memory = std::make_shared<TensorDataset>(
      [&] {
        DataLoader all(cifar_shaped, DataLoaderOptions(50000).workers(0));
        return all.begin()->data;  // materialised once, so the loader measures copies, not Philox
      }(),
      ember::zeros({50000}, ember::kInt64));
  auto cifar_augment = std::make_shared<Compose>(RandomCrop(32, 4), RandomHorizontalFlip(), ToFloat(),
                                                 Normalize({0.491f, 0.482f, 0.447f}, {0.247f, 0.243f, 0.262f}));
  std::printf("\n");
  report("CIFAR-shaped uint8 [3, 32, 32] in memory, batch 128, RandomCrop(32, 4) + flip + ToFloat + Normalize",
         in_memory, cifar_augment);
  report("CIFAR-shaped synthetic, generated per example (Philox), same transforms", cifar_shaped, cifar_augment);

  std::printf("\nPer transform, one thread, CIFAR-shaped image, CPU time:\n");
  struct Named {
    const char* name;
    TransformPtr transform;
  };
  std::vector<Named> transforms = {
      {"none (get + memcpy)", std::make_shared<Compose>(std::vector<TransformPtr>{})},
      {"ToFloat", std::make_shared<ToFloat>()},
      {"RandomCrop(32, 4)", std::make_shared<RandomCrop>(32, 4)},
      {"RandomHorizontalFlip", std::make_shared<RandomHorizontalFlip>()},
      {"Cutout(16)", std::make_shared<Cutout>(16)},
      {"full CIFAR pipeline", cifar_augment},
  };
  for (const Named& t : transforms) {
    std::printf("  %-22s %8.0f ns/image\n", t.name, transform_ns_per_image(*in_memory, *t.transform, 200000));
  }
  return 0;
}
