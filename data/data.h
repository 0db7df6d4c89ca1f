// Everything //data offers, in one include: datasets, readers, transforms, samplers, DataLoader.
//
//   using namespace ember::data;
//   auto train = std::make_shared<FashionMNIST>();   // /usr/share/datasets/fashion-mnist
//   auto augment = std::make_shared<Compose>(RandomCrop(28, 2), ToFloat(), Normalize({0.286f}, {0.353f}));
//   DataLoader loader(train, DataLoaderOptions(128).shuffle(true).seed(1).workers(1).transform(augment));
//   for (Batch& batch : loader) { /* batch.data [128, 1, 28, 28] float32, batch.target [128] int64 */ }
#pragma once

#include "data/batch.h"
#include "data/cifar.h"
#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/example_random.h"
#include "data/gzip.h"
#include "data/idx.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "data/image_transforms.h"
#include "data/mnist.h"
#include "data/sampler.h"
#include "data/synthetic.h"
#include "data/transform.h"
#include "data/transforms.h"
